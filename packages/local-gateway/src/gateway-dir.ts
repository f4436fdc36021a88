import { lstatSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { LocalGatewayError } from './errors.js';
import { type GatewayLayout, gatewayLayout } from './layout.js';
import type { ResolvedLocalGatewayLocation } from './options.js';
import { resolveServerCommand, type ServerCommand } from './server-command.js';
import { canonicalPrivatePath, ensurePrivateDir, unsafeDirectoryReason } from './state-dir.js';

/** One gateway: the jupyter-server it runs and where its state lives. */
export interface LocatedGateway {
  server: ServerCommand;
  layout: GatewayLayout;
}

/**
 * Finds the gateway of `command` below the base state directory: `<stateDir>/gateway-<key>`, keyed by the uid and
 * the server's interpreter. Throws `LOCAL_GATEWAY_COMMAND` when the server executable cannot be found.
 */
export function locateGateway(location: Pick<ResolvedLocalGatewayLocation, 'stateDir' | 'command'>): LocatedGateway {
  const server = resolveServerCommand(location.command);
  if (!server) {
    throw new LocalGatewayError(
      `Cannot start the local gateway: "${location.command}" was not found on PATH; install jupyter_server (pip install jupyter-server) or pass \`command\``,
      { code: 'LOCAL_GATEWAY_COMMAND' },
    );
  }
  return { server, layout: gatewayLayout(join(privateStateDir(location.stateDir), `gateway-${server.key}`)) };
}

/**
 * The canonical path of the base state directory, checked before anything in it is read or started: a path through a
 * symbolic link or directory another user controls is refused (they could swap the tree below it for one of theirs
 * — a `jupyter_server_config.py`, kernelspecs — once the server starts), and so is a state directory other users can
 * write to, sticky or not (they could create the gateway's directory, whose name is derived from the uid and the
 * server, before this user does). Everything after uses the canonical path only.
 */
export function privateStateDir(stateDir: string): string {
  const canonical = canonicalPrivatePath(stateDir);
  let reason = canonical.reason;
  if (canonical.path !== undefined) {
    try {
      const st = lstatSync(canonical.path);
      if ((st.mode & 0o022) !== 0) {
        reason = `${canonical.path} is writable by other users (mode ${(st.mode & 0o7777).toString(8)})`;
      }
    } catch {
      // not created yet: it will be, 0700
    }
  }
  if (reason !== undefined || canonical.path === undefined) {
    throw new LocalGatewayError(
      `The local gateway's state directory ${stateDir} is not safe to use: ${reason}; choose a stateDir whose every directory and link belongs to you or root`,
      { code: 'LOCAL_GATEWAY_STATE_DIR' },
    );
  }
  return canonical.path;
}

/**
 * Creates the gateway directory and its subdirectories (0700), refusing one that is not private to this user. Its name
 * is derived from the uid and the server, so every process of the user finds the same gateway; the base state
 * directory (`privateStateDir`) is one no other user can write to, so no one else can plant it — checked here again.
 */
export function prepareGatewayDir(layout: GatewayLayout): void {
  try {
    mkdirSync(layout.dir, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new LocalGatewayError(`Cannot create the local gateway's state directory ${layout.dir}`, {
      code: 'LOCAL_GATEWAY_STATE_DIR',
      cause: error,
    });
  }
  const st = lstatSync(layout.dir);
  const uid = typeof process.getuid === 'function' ? process.getuid() : st.uid;
  if (!st.isDirectory() || st.uid !== uid) {
    throw new LocalGatewayError(
      `The local gateway's state directory ${layout.dir} is not a directory owned by this user; remove it or choose another stateDir`,
      { code: 'LOCAL_GATEWAY_STATE_DIR' },
    );
  }
  for (const dir of [
    layout.dir,
    layout.tickets,
    layout.owners,
    layout.runtime,
    layout.kernelSpecDir,
    layout.config,
    layout.kernelLogs,
    layout.pool,
    layout.poolClaims,
    layout.poolKept,
  ]) {
    ensurePrivateDir(dir);
  }
  const canonical = canonicalPrivatePath(layout.dir);
  const unsafe =
    canonical.reason ??
    (canonical.path !== layout.dir ? `it resolves to ${canonical.path}` : unsafeDirectoryReason(layout.dir));
  if (unsafe) {
    throw new LocalGatewayError(
      `The local gateway's state directory ${layout.dir} is not private to this user (${unsafe}); fix its ownership and permissions or choose another stateDir`,
      { code: 'LOCAL_GATEWAY_STATE_DIR' },
    );
  }
}

/** A kernel log not written for this long is removed (a running kernel keeps writing to its open file). */
export const KERNEL_LOG_KEEP_MS = 3_600_000;

/** How often the linger watcher prunes kernel logs (its first look does too). */
export const KERNEL_LOG_PRUNE_INTERVAL_MS = 300_000;

/** Removes the logs of kernels that have not written for an hour (`KERNEL_LOG_KEEP_MS`). */
export function pruneKernelLogs(layout: GatewayLayout): void {
  let names: string[];
  try {
    names = readdirSync(layout.kernelLogs);
  } catch {
    return;
  }
  const now = Date.now();
  for (const name of names) {
    const path = join(layout.kernelLogs, name);
    try {
      if (now - lstatSync(path).mtimeMs > KERNEL_LOG_KEEP_MS) rmSync(path, { force: true });
    } catch {
      // gone meanwhile
    }
  }
}
