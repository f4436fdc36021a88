import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalGatewayError } from './errors.js';
import { MAX_IPC_BASE_LENGTH } from './kernel-launch.js';
import type { GatewayLayout } from './layout.js';
import { canonicalPrivatePath, ensurePrivateDir } from './state-dir.js';

/**
 * A private directory for the kernels' ipc sockets whose path is short enough for socket names: the state
 * directory's own `ipc` when it is, else a fresh one under the system temporary directory (random name, 0700).
 */
export function makeIpcDir(layout: GatewayLayout): string {
  if (layout.ipc.length <= MAX_IPC_BASE_LENGTH) {
    rmSync(layout.ipc, { recursive: true, force: true });
    ensurePrivateDir(layout.ipc);
    return layout.ipc;
  }
  // The temporary directory as a path no other user can redirect (a link or directory of theirs on the way).
  const base = canonicalPrivatePath(tmpdir());
  if (base.path === undefined) {
    throw new LocalGatewayError(
      `The state directory ${layout.dir} is too long for the kernels' sockets and the temporary directory is not safe to put them in (${base.reason}); set TMPDIR or stateDir to a shorter path`,
      { code: 'LOCAL_GATEWAY_STATE_DIR' },
    );
  }
  const dir = mkdtempSync(join(base.path, 'kw-ipc-'));
  chmodSync(dir, 0o700);
  if (dir.length > MAX_IPC_BASE_LENGTH) {
    rmSync(dir, { recursive: true, force: true });
    throw new LocalGatewayError(
      `Neither the state directory ${layout.dir} nor the temporary directory ${tmpdir()} gives a path short enough for the kernels' sockets (at most ${MAX_IPC_BASE_LENGTH} characters); set TMPDIR or stateDir to a shorter path`,
      { code: 'LOCAL_GATEWAY_STATE_DIR' },
    );
  }
  return dir;
}

/** Removes a server run's ipc directory (the state directory's own is emptied); any other path is left alone. */
export function removeIpcDir(layout: GatewayLayout, ipcDir: string | undefined): void {
  if (!ipcDir) return;
  if (ipcDir !== layout.ipc && !/\/kw-ipc-[^/]+$/.test(ipcDir)) return;
  rmSync(ipcDir, { recursive: true, force: true });
}
