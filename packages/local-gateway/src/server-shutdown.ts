import { isProcessAlive } from '@kernelwarden/core/os';
import type { ServerInfo } from './info-file.js';
import { removeIpcDir } from './ipc-dir.js';
import { clearPool } from './kernel-pool.js';
import type { GatewayLayout } from './layout.js';
import { isLingerWatcherOf } from './linger-watcher.js';
import { clearOwners } from './ownership.js';
import { stopServerProcess } from './server-process.js';
import { mayStopRecordedServer } from './server-verification.js';
import { removeFile } from './state-dir.js';
import { liveTickets } from './tickets.js';

/** Removes the state of a stopped server (tickets and ownership records refer to it alone). */
export function clearServerState(layout: GatewayLayout, info?: ServerInfo): void {
  removeIpcDir(layout, info?.ipcDir);
  removeFile(layout.info);
  removeFile(layout.idle);
  removeFile(layout.tokenFile);
  clearOwners(layout.owners);
  clearPool(layout);
  liveTickets(layout.tickets); // prunes dead holders' files
}

/**
 * Stops the recorded server and clears its state; the caller holds the lock. A recorded pid that is not this
 * gateway's server (a forged or stale `server.json`) is never signalled: only the kernels found by their connection
 * files and by the run's kernel marker are. Without a record, leftover kernels are swept by connection file only.
 */
export async function stopRecordedServer(
  layout: GatewayLayout,
  info: ServerInfo | undefined,
  graceMs: number,
): Promise<void> {
  const server = info && mayStopRecordedServer(layout, info) ? info.server : { pid: -1 };
  await stopServerProcess(server, { runtimeDir: layout.runtime, graceMs, instance: info?.instance });
  clearServerState(layout, info);
}

/** Stops the recorded server's linger watcher (if it is still this gateway's), then the server itself. */
export async function shutDownServer(layout: GatewayLayout, info: ServerInfo, graceMs: number): Promise<void> {
  if (info.watcher && isProcessAlive(info.watcher) && isLingerWatcherOf(layout, info.watcher.pid)) {
    try {
      process.kill(info.watcher.pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  await stopRecordedServer(layout, info, graceMs);
}
