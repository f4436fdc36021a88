import { lazyModule } from '@kernelwarden/core';
import type * as Zod from 'zod/v3';

/**
 * zod, loaded the first time a schema is built (`zod().z`): importing this package does not load it — it would be
 * most of what an import costs. Every schema of the package is built through `lazy(() => …)`.
 */
// The literal require() is what a bundler inlines for an application bundled into one file (see lazyModule).
export const zod = lazyModule<typeof Zod>('zod/v3', import.meta.url, () => require('zod/v3'));
