import type { LocalGatewayStatus } from '@kernelwarden/local-gateway';

/** One kernel as `gateway status` lists it: the fields named here, and any other the gateway reports. */
type KernelEntry = LocalGatewayStatus['kernels'][number] & Readonly<Record<string, unknown>>;

/** The fields a kernel's line shows in their own places; every other field follows them as `name value`. */
const PLACED = new Set(['id', 'name', 'executionState', 'ownerPid', 'ownerAlive', 'pooled']);

function fieldText(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}

/**
 * A kernel's line in `gateway status`: `  ID NAME STATE (pid OWNER[, gone])[, pooled]`, then each further field the
 * gateway reports for it (its interpreter, its ipykernel …) as `name value`, in the gateway's order.
 */
export function kernelStatusLine(kernel: KernelEntry): string {
  const owner = kernel.ownerPid ? ` (pid ${kernel.ownerPid}${kernel.ownerAlive ? '' : ', gone'})` : '';
  const extra = Object.entries(kernel)
    .filter(([key]) => !PLACED.has(key))
    .flatMap(([key, value]) => {
      const text = fieldText(value);
      return text === undefined ? [] : [`${key} ${text}`];
    });
  const details = [...(kernel.pooled ? ['pooled'] : []), ...extra];
  const head = [kernel.id, kernel.name, ...(kernel.executionState ? [kernel.executionState] : [])].join(' ');
  return `  ${head}${owner}${details.length > 0 ? `; ${details.join(', ')}` : ''}`;
}

/** The text `gateway status` prints for a running gateway (the token is never part of the status). */
export function runningStatusText(status: LocalGatewayStatus): string {
  const lines = [
    `running: ${status.baseUrl} (pid ${status.pid}, since ${status.startedAt})`,
    `server: ${status.command} (${status.interpreter})`,
    `state: ${status.stateDir}`,
    `holders: ${status.holders.length === 0 ? 'none' : status.holders.map((h) => `pid ${h.pid}`).join(', ')}`,
    `kernels: ${status.kernels.length === 0 ? 'none' : ''}`,
    ...status.kernels.map((kernel) => kernelStatusLine(kernel)),
  ];
  return lines.join('\n');
}
