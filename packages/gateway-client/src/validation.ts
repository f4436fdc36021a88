/** Options parsing shared by every package: core's `parseOptions` (zod schema in, `InvalidOptionsError` out). */
export { parseOptions } from '@kernelwarden/core';
