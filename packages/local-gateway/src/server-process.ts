import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readSync, renameSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { sleep, withDeadline } from '@kernelwarden/core';
import {
  identityOf,
  isProcessAlive,
  kernelMarker,
  type ProcessIdentity,
  processesCarrying,
  processesMentioning,
  signalGroup,
} from '@kernelwarden/core/os';
import { loopbackRequest } from './guarded-transport.js';
import { listenerOwnership } from './listener.js';

/** Finds a free loopback port (listen on port 0, close, hand the number over). */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no free port')),
      );
    });
  });
}

/** A process we spawned detached. */
export interface SpawnedProcess {
  identity: ProcessIdentity;
  child: ChildProcess;
  /** Resolves with how the process ended (`exit code 1`, `signal SIGKILL`, `spawn error: …`). */
  exited: Promise<string>;
  hasExited(): boolean;
}

/**
 * Spawns `command args` in its own process group (setsid: it outlives us and can be stopped as a group), with stdout and
 * stderr appended to `logFile` — never a pipe nobody reads.
 */
export function spawnDetached(
  command: string,
  args: readonly string[],
  opts: { env: NodeJS.ProcessEnv; logFile: string; cwd: string },
): SpawnedProcess {
  const log = openSync(opts.logFile, 'a', 0o600);
  let child: ChildProcess;
  try {
    child = spawn(command, args, { detached: true, stdio: ['ignore', log, log], env: opts.env, cwd: opts.cwd });
  } finally {
    closeSync(log);
  }
  let ended: string | undefined;
  const exited = new Promise<string>((resolve) => {
    child.once('error', (error) => resolve((ended = `spawn error: ${error.message}`)));
    child.once('exit', (code, signal) => resolve((ended = signal ? `signal ${signal}` : `exit code ${code}`)));
  });
  child.unref();
  return { identity: identityOf(child.pid ?? -1), child, exited, hasExited: () => ended !== undefined };
}

/** The size of a file, 0 when it does not exist. */
export function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

/** Keeps a log from growing without bound: past `maxBytes` it becomes `<path>.1` (replacing the older one). */
export function rotateLog(path: string, maxBytes = 1_000_000): void {
  if (fileSize(path) <= maxBytes) return;
  try {
    renameSync(path, `${path}.1`);
  } catch {
    // another process rotated it first
  }
}

/**
 * The last `maxLines` lines written to a log file after byte `from`, with every occurrence of `secret` masked.
 */
export function logTail(path: string, secret: string, from = 0, maxLines = 12): string {
  let text: string;
  try {
    const size = statSync(path).size;
    const length = Math.max(0, Math.min(size - from, 16_384));
    const buffer = Buffer.alloc(length);
    const fd = openSync(path, 'r');
    try {
      readSync(fd, buffer, 0, length, size - length);
    } finally {
      closeSync(fd);
    }
    text = buffer.toString('utf8');
  } catch {
    return '';
  }
  return text.split(secret).join('<token>').trimEnd().split('\n').slice(-maxLines).join('\n');
}

/** Outcome of waiting for a server to answer. */
export type Readiness =
  | { ready: true }
  | { ready: false; ended: string }
  | { ready: false; refused: number }
  | { ready: false; foreign: true };

/**
 * Waits until the server process itself listens on `127.0.0.1:port` (read from the process table: no request, no token goes
 * to the port before that), then polls `GET /api/status` with the token until it answers 200, or until the process
 * exits. A port on which another process listens ends the wait with `foreign` (someone bound it first). Rejects
 * with the signal's reason when `signal` aborts.
 */
export async function waitUntilReady(opts: {
  baseUrl: string;
  port: number;
  token: string;
  server: SpawnedProcess;
  signal: AbortSignal;
  pollMs?: number;
}): Promise<Readiness> {
  const { server, signal } = opts;
  let listening = false;
  for (;;) {
    signal.throwIfAborted();
    if (server.hasExited()) return { ready: false, ended: await server.exited };
    if (!listening) {
      const owner = listenerOwnership(opts.port, server.identity.pid);
      if (owner === 'foreign') return { ready: false, foreign: true };
      listening = owner === 'ours' || owner === 'unknown';
      if (!listening) {
        await Promise.race([sleep(opts.pollMs ?? 50, { signal }), server.exited]);
        continue;
      }
    }
    const status = await statusCode(opts.baseUrl, opts.token, signal, 2_000);
    if (status === 200) return { ready: true };
    if (status === 401 || status === 403) return { ready: false, refused: status };
    await Promise.race([sleep(opts.pollMs ?? 100, { signal }), server.exited]);
  }
}

/** The HTTP status of `GET /api/status` with the token, or undefined when it does not answer within `timeoutMs`. */
async function statusCode(
  baseUrl: string,
  token: string,
  signal: AbortSignal | undefined,
  timeoutMs: number,
): Promise<number | undefined> {
  try {
    return await withDeadline(
      async (s) => {
        const res = await loopbackRequest(`${baseUrl}/api/status`, {
          method: 'GET',
          headers: { Authorization: `token ${token}` },
          signal: s,
        });
        return res.status;
      },
      { signal, timeoutMs },
    );
  } catch {
    signal?.throwIfAborted();
    return undefined;
  }
}

/** True when `GET /api/status` answers 200 with the token within `timeoutMs`. */
export async function answersStatus(
  baseUrl: string,
  token: string,
  signal: AbortSignal | undefined,
  timeoutMs: number,
): Promise<boolean> {
  return (await statusCode(baseUrl, token, signal, timeoutMs)) === 200;
}

/** The HTTP status of an unauthenticated `GET /api/kernels` (to check the token is enforced). */
export async function unauthenticatedStatus(baseUrl: string, signal: AbortSignal): Promise<number> {
  return withDeadline(
    async (s) => {
      const res = await loopbackRequest(`${baseUrl}/api/kernels`, { method: 'GET', headers: {}, signal: s });
      return res.status;
    },
    { signal, timeoutMs: 5_000 },
  );
}

async function waitForExit(id: ProcessIdentity, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (isProcessAlive(id)) {
    if (Date.now() >= until) return false;
    await sleep(50);
  }
  return true;
}

/**
 * Pids of a server's kernel processes: those whose command line mentions a connection file in `runtimeDir`, and,
 * given the server run's `instance`, every process carrying its kernel marker in its environment (the kernels'
 * descendants, those in process groups of their own included).
 */
export function kernelProcesses(runtimeDir: string, instance?: string): number[] {
  const pids = processesMentioning(`${runtimeDir}/kernel-`) ?? [];
  if (!instance) return pids;
  const marked = processesCarrying(kernelMarker({ instance }));
  return [...new Set([...pids, ...marked])];
}

/**
 * Stops a server: SIGTERM to its process group (jupyter-server then shuts its kernels down), SIGKILL after
 * `graceMs`, and finally SIGKILL to any kernel process still holding one of its connection files (kernels run in
 * process groups of their own, so a group signal does not reach them).
 */
export async function stopServerProcess(
  server: ProcessIdentity,
  opts: { runtimeDir: string; graceMs: number; instance?: string | undefined },
): Promise<void> {
  if (isProcessAlive(server)) {
    signalGroup(server.pid, 'SIGTERM');
    if (!(await waitForExit(server, opts.graceMs))) {
      signalGroup(server.pid, 'SIGKILL');
      await waitForExit(server, 2_000);
    }
  }
  for (let round = 0; round < 5; round++) {
    const leftovers = kernelProcesses(opts.runtimeDir, opts.instance).map(identityOf);
    if (leftovers.length === 0) break;
    for (const kernel of leftovers) {
      signalGroup(kernel.pid, 'SIGKILL');
      try {
        process.kill(kernel.pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    for (const kernel of leftovers) await waitForExit(kernel, 2_000);
  }
}
