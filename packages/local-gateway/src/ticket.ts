import { kernelMarker, killProcessesCarrying } from '@kernelwarden/core/os';
import type {
  GatewayRequest,
  KernelDiagnostics,
  KernelOwnership,
  KernelPool,
  KernelProcesses,
  StartQueue,
  WebSocketClass,
} from '@kernelwarden/gateway-client';
import type { Emit } from './events.js';
import { guardedTransport } from './guarded-transport.js';
import { readServerInfo, type ServerInfo } from './info-file.js';
import { kernelDiagnostics } from './kernel-diagnostics.js';
import { claimPooledKernel, keepPooled, readPoolConfig } from './kernel-pool.js';
import type { GatewayLayout } from './layout.js';
import { acquireLock } from './lock.js';
import { forgetOwner, recordOwner } from './ownership.js';
import { shutDownServer } from './server-shutdown.js';
import { removeFile } from './state-dir.js';
import { lingerPending, liveTickets, markIdle } from './tickets.js';

/** A ticket's view of the server's warm pool. */
export interface LocalGatewayPool extends KernelPool {
  /** How many ready kernels of kernelspec `kernelName` the pool keeps now (0: that kernelspec is not pooled). */
  size(kernelName: string): number;
  /**
   * Pools kernelspec `kernelName` with the count of kernelspec `like`: an isolated kernelspec installed in
   * `kernelSpecDir` for the server (`installIsolatedKernelSpec({ ownerPid: ticket.pid })`), pooled like its base
   * (`python3`), so that the next process with the same policy claims a started kernel. It stays pooled while its
   * spec exists and some process asked for it in the last `KEPT_POOL_MS` (each call renews it), for at most
   * `MAX_KEPT_POOLS` kernelspecs at once (the most recent).
   */
  keep(kernelName: string, like: string): void;
}

/**
 * A ticket on the embedded gateway: pass it as `gateway` to `GatewayKernel.start()` / `new GatewayClient()`, and
 * release it (or `await using` it) when done. The server is shared by every process of the same user and
 * interpreter, and stops once no ticket is held for `lingerMs`.
 */
export interface LocalGatewayTicket extends AsyncDisposable {
  /** `http://127.0.0.1:<port>`. */
  readonly baseUrl: string;
  /** The server's token (send as `Authorization: token …`). Never print it. */
  readonly token: string;
  /** A directory on the server's `JUPYTER_PATH`: a kernelspec folder written here is launchable by name at once. */
  readonly kernelSpecDir: string;
  /** This gateway's state directory (`<stateDir>/gateway-<key>`). */
  readonly stateDir: string;
  /** The server's pid. */
  readonly pid: number;
  /** True when an already running server was reused. */
  readonly reused: boolean;
  /** Records which process created which kernel; GatewayClient/GatewayKernel call it when given this ticket. */
  readonly ownership: KernelOwnership;
  /**
   * Whether a kernel's process runs, and its last stderr lines (from the kernel's own log): `GatewayKernel.start()`
   * uses them to fail a kernel that dies while starting at once, with its own error.
   */
  readonly diagnostics: KernelDiagnostics;
  /**
   * The warm pool of the server: `GatewayKernel.start()` through this ticket claims a ready kernel of the kernelspec it
   * wants (this process becomes its owner) instead of creating one. `claim()` never hands a kernel to two processes.
   */
  readonly pool: LocalGatewayPool;
  /**
   * The server's kernel processes: `kill(id)` SIGKILLs every process carrying the kernel's marker, at once.
   * `GatewayKernel.kill()` through this ticket uses it, then moves to a pooled kernel.
   */
  readonly processes: KernelProcesses;
  /**
   * The server's start queue (`maxConcurrentStarts`, `maxKernels`): `GatewayKernel.start()` through this ticket does not
   * count the time its create waits for a turn toward `startupTimeoutMs`; `timeoutMs` (the acquire's
   * `startQueueTimeoutMs`) bounds that wait.
   */
  readonly startQueue: StartQueue;
  /**
   * A fetch for the server: before each request it checks that the server this ticket is for still holds its port
   * (read from the process table, without connecting), so nothing — least of all the token — is ever sent to a process that took the port after the
   * server went away.
   */
  readonly fetch: typeof fetch;
  /**
   * The REST transport GatewayClient/GatewayKernel use through this ticket: HTTP/1.1 over `node:http` (Node's `fetch`
   * costs a command ~20 ms to load), with the same check before each request.
   */
  readonly request: GatewayRequest;
  /** The WebSocket class for kernel channels through this ticket, with the same check before each connect. */
  readonly WebSocket: WebSocketClass;
  /** Gives the ticket back; idempotent. The last release starts the linger (or stops the server when it is 0). */
  release(opts?: { signal?: AbortSignal }): Promise<void>;
}

/** How a ticket ends: its holder file, and what its release does when it was the last one. */
export interface TicketRelease {
  ticketFile: string;
  lingerMs: number;
  graceMs: number;
  emit: Emit;
}

/**
 * Gives a ticket back under the lock. The last one out either extends the linger promise (the watcher stops the
 * server when it runs out) or, with `lingerMs: 0` and no promise pending, stops the server itself.
 */
export async function releaseTicket(
  layout: GatewayLayout,
  { ticketFile, lingerMs, graceMs, emit }: TicketRelease,
  signal: AbortSignal | undefined,
): Promise<void> {
  const lock = await acquireLock(layout.lock, { signal });
  try {
    removeFile(ticketFile);
    if (liveTickets(layout.tickets).length > 0) return;
    // A linger promised by an earlier release (e.g. `gateway start` for an hour) outlives a shorter one, even 0.
    if (lingerMs > 0 || lingerPending(layout.idle)) {
      markIdle(layout.idle, lingerMs);
      return;
    }
    const info = readServerInfo(layout.info);
    if (!info) return;
    await shutDownServer(layout, info, graceMs);
    emit({ type: 'server-stopped', pid: info.server.pid, reason: 'last-release' });
  } finally {
    lock.release();
  }
}

/** The ticket handed to the caller: the server's address and token, the guarded transport, ownership and release. */
export function makeTicket(
  layout: GatewayLayout,
  info: ServerInfo,
  reused: boolean,
  ending: TicketRelease,
  startQueue: StartQueue,
): LocalGatewayTicket {
  let released: Promise<void> | undefined;
  const release = (opts: { signal?: AbortSignal } = {}) => {
    released ??= releaseTicket(layout, ending, opts.signal).catch((error: unknown) => {
      released = undefined;
      throw error;
    });
    return released;
  };
  const ownership: KernelOwnership = {
    created: (id) => {
      recordOwner(layout.owners, id);
    },
    deleted: (id) => forgetOwner(layout.owners, id),
    // A create's own id, recorded before the request leaves: a process that dies mid-create leaves its kernel to the
    // orphan sweep.
    creating: (id) => {
      recordOwner(layout.owners, id);
    },
    notCreated: (id) => forgetOwner(layout.owners, id),
  };
  const ticket: LocalGatewayTicket = {
    baseUrl: info.baseUrl,
    token: info.token,
    kernelSpecDir: layout.kernelSpecDir,
    stateDir: layout.dir,
    pid: info.server.pid,
    reused,
    ownership,
    diagnostics: kernelDiagnostics({ runtimeDir: layout.runtime, kernelLogDir: layout.kernelLogs }, info.token),
    pool: {
      claim: (kernelName) => claimPooledKernel(layout, kernelName),
      size: (kernelName) => readPoolConfig(layout)[kernelName] ?? 0,
      keep: (kernelName, like) => keepPooled(layout, kernelName, like),
    },
    // Without the run's marker (a server recorded by an older version) nothing is killed here: the kill falls back
    // to the server's own restart.
    processes: {
      kill: (kernelId) =>
        info.instance !== undefined &&
        killProcessesCarrying(kernelMarker({ instance: info.instance, kernelId })).length > 0,
    },
    startQueue: Object.freeze({ ...startQueue }),
    ...guardedTransport(info.baseUrl, info.port, info.server.pid),
    release,
    [Symbol.asyncDispose]: () => release(),
  };
  // Keep the token out of accidental logging (JSON.stringify, console.log / util.inspect); spreads still copy it.
  const redacted = () => ({
    baseUrl: info.baseUrl,
    token: '<redacted>',
    kernelSpecDir: layout.kernelSpecDir,
    stateDir: layout.dir,
    pid: info.server.pid,
    reused,
  });
  Object.defineProperty(ticket, 'toJSON', { value: redacted, enumerable: false });
  Object.defineProperty(ticket, Symbol.for('nodejs.util.inspect.custom'), { value: redacted, enumerable: false });
  return ticket;
}
