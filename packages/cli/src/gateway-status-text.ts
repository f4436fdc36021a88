import type { LocalGatewayStatus } from '@kernelwarden/local-gateway';

/** One kernel as `gateway status` lists it: the fields named here, and any other the gateway reports. */
type KernelEntry = LocalGatewayStatus['kernels'][number] & Readonly<Record<string, unknown>>;

/** The fields a kernel's line shows in their own places; every other field follows them as `name value`. */
const PLACED = new Set([
  'id',
  'name',
  'executionState',
  'ownerPid',
  'ownerAlive',
  'pooled',
  'interpreter',
  'ipykernel',
  'launch',
]);

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
  return `  ${head}${owner}${kernelRuntime(kernel)}${details.length > 0 ? `; ${details.join(', ')}` : ''}`;
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
    ...launcherLines(status.launcher),
  ];
  return lines.join('\n');
}

/** A kernel's interpreter, ipykernel and launch, for `gateway status`: ` python /usr/bin/python3, ipykernel 6.17.0, forked`. */
export function kernelRuntime(k: LocalGatewayStatus['kernels'][number]): string {
  const parts = [
    ...(k.interpreter ? [`python ${k.interpreter}`] : []),
    ...(k.interpreter ? [`ipykernel ${k.ipykernel ?? 'unknown'}`] : []),
    ...(k.launch === 'fork' ? ['forked'] : k.launch === 'exec' && k.interpreter ? ["exec'd"] : []),
  ];
  return parts.length === 0 ? '' : ` — ${parts.join(', ')}`;
}

/** The launchers' lines of `gateway status`. */
export function launcherLines(launcher: LocalGatewayStatus['launcher']): string[] {
  if (!launcher) return [];
  if (launcher.mode === 'exec')
    return ["launchers: none (launcher exec: every kernel is exec'd; KERNELWARDEN_LAUNCHER=fork forks them)"];
  return [
    `launchers: ${launcher.launchers.length === 0 ? 'none yet' : ''}`,
    ...launcher.launchers.map(
      (l) =>
        `  ${l.interpreter} ${l.state}${l.pid ? ` (pid ${l.pid}${l.rssBytes === undefined ? '' : `, ${formatMiB(l.rssBytes)} RSS`})` : ''}` +
        `${l.ipykernel ? `, ipykernel ${l.ipykernel}` : ''}${l.preload.length ? `, preloads ${l.preload.join(',')}` : ''}` +
        `${l.reason ? ` — ${l.reason}` : ''}`,
    ),
    "  (kernels of isolated kernelspecs are always exec'd)",
  ];
}

function formatMiB(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}
