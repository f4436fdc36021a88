import { isProcessAlive, processEnvironHas, processUid } from '@kernelwarden/core/os';
import type { ServerInfo } from './info-file.js';
import type { GatewayLayout } from './layout.js';
import { listenerOwnership } from './listener.js';

/**
 * Why the server `server.json` records is not (or no longer) the one this gateway started; undefined when it is.
 * Checked before any request carries the token to it and before any signal is sent to its pid: the process is
 * alive with its recorded start time, runs as this user, was started with this gateway's own
 * `JUPYTER_CONFIG_DIR`, and itself holds the socket listening on the recorded 127.0.0.1 port.
 */
export function unverifiedServerReason(layout: GatewayLayout, info: ServerInfo): string | undefined {
  const { pid } = info.server;
  if (info.baseUrl !== `http://127.0.0.1:${info.port}`) return `the recorded address ${info.baseUrl} is not ours`;
  if (!isProcessAlive(info.server)) return `process ${pid} is not running`;
  const uid = process.getuid?.();
  const owner = processUid(pid);
  if (uid !== undefined && owner !== undefined && owner !== uid) return `process ${pid} runs as uid ${owner}`;
  if (!startedByThisGateway(layout, pid)) return `process ${pid} is not this gateway's jupyter-server`;
  const listener = listenerOwnership(info.port, pid, process.getuid?.() ?? -1, info.listeners);
  if (listener === 'foreign') return `another process listens on port ${info.port}`;
  if (listener === 'none') return `nothing listens on port ${info.port}`;
  return undefined;
}

/** Whether the recorded process may be signalled: it is alive, ours, and this gateway's server. */
export function mayStopRecordedServer(layout: GatewayLayout, info: ServerInfo): boolean {
  const { pid } = info.server;
  if (!isProcessAlive(info.server)) return false;
  const uid = process.getuid?.();
  const owner = processUid(pid);
  if (uid !== undefined && owner !== undefined && owner !== uid) return false;
  return startedByThisGateway(layout, pid);
}

/** Linux shows a process's initial environment to its own user: this gateway's server has its config dir there. */
function startedByThisGateway(layout: GatewayLayout, pid: number): boolean {
  const has = processEnvironHas(pid, `JUPYTER_CONFIG_DIR=${layout.config}`);
  return has === true || (has === undefined && process.platform !== 'linux');
}
