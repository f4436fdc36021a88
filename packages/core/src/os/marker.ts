import type { EnvMarker } from './scan.js';

/**
 * The environment variable every process of a kernel the embedded gateway (`@kernelwarden/local-gateway`) launches
 * carries, and everything that process starts inherits: `<server instance>:<kernel id>`.
 */
export const KERNEL_MARKER_ENV = 'KERNELWARDEN_KERNEL';

/**
 * The marker of the processes of one kernel (`kernelId`), of every kernel of one server run (`instance`), or of both
 * (`<instance>:<kernel id>`, exactly). Kernel ids are UUIDs: a kernel id alone names one kernel of one server.
 */
export function kernelMarker(of: { instance?: string; kernelId?: string }): EnvMarker {
  const { instance, kernelId } = of;
  if (instance !== undefined && kernelId !== undefined) {
    return { name: KERNEL_MARKER_ENV, value: `${instance}:${kernelId}` };
  }
  return {
    name: KERNEL_MARKER_ENV,
    ...(instance !== undefined ? { valuePrefix: `${instance}:` } : {}),
    ...(kernelId !== undefined ? { valueSuffix: `:${kernelId}` } : {}),
  };
}
