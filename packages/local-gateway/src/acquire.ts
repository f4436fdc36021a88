import { abortScope, DeadlineExceededError } from '@kernelwarden/core';
import { emitter } from './events.js';
import { locateGateway, prepareGatewayDir } from './gateway-dir.js';
import { serverClient } from './guarded-transport.js';
import type { ServerInfo } from './info-file.js';
import { writePoolConfig } from './kernel-pool.js';
import { acquireLock, type HeldLock } from './lock.js';
import { DEFAULT_STOP_TIMEOUT_MS, type LocalGatewayOptions, resolveLocalGatewayOptions } from './options.js';
import { reapOrphanKernels } from './ownership.js';
import { ensureServer } from './server-start.js';
import { readTextFile } from './state-dir.js';
import { type LocalGatewayTicket, makeTicket, releaseTicket, type TicketRelease } from './ticket.js';
import { addTicket, clearExpiredIdle } from './tickets.js';

function lockTimeoutError(scopeMs: number, lockPath: string, cause: unknown): DeadlineExceededError {
  const owner = readTextFile(lockPath);
  let pid = 'another process';
  try {
    if (owner) pid = `pid ${(JSON.parse(owner) as { pid: number }).pid}`;
  } catch {
    // unreadable: keep the generic wording
  }
  return new DeadlineExceededError(
    `Timed out after ${scopeMs} ms waiting for the local gateway lock held by ${pid} (${lockPath})`,
    { timeoutMs: scopeMs, cause },
  );
}

/**
 * `LocalGateway.acquire()`: under the gateway lock, reuse or start the server and record this process's ticket;
 * then, without the lock, reap the kernels of dead processes. A failure after the ticket was recorded gives it back.
 */
export async function acquireTicket(options: LocalGatewayOptions): Promise<LocalGatewayTicket> {
  const opts = resolveLocalGatewayOptions(options);
  const located = locateGateway(opts);
  const { layout } = located;
  prepareGatewayDir(layout);
  const emit = emitter(opts.onEvent);
  const scope = abortScope({
    signal: opts.signal,
    timeoutMs: opts.startupTimeoutMs,
    timeoutMessage: `The local gateway did not become available within ${opts.startupTimeoutMs} ms; see ${layout.log}`,
  });
  let lock: HeldLock | undefined;
  let ending: TicketRelease | undefined;
  try {
    try {
      lock = await acquireLock(layout.lock, {
        signal: scope.signal,
        onWait: (owner) => emit({ type: 'lock-wait', ownerPid: owner.pid }),
        onTakeover: (previous) => emit({ type: 'lock-takeover', previousOwnerPid: previous?.pid }),
      });
    } catch (error) {
      if (scope.timedOut) throw lockTimeoutError(opts.startupTimeoutMs, layout.lock, error);
      throw error;
    }
    let info: ServerInfo;
    let reused: boolean;
    try {
      ({ info, reused } = await ensureServer(located, opts, options.lingerMs, scope.signal, emit));
      const ticketFile = addTicket(layout.tickets, opts.lingerMs);
      ending = { ticketFile, lingerMs: opts.lingerMs, graceMs: opts.stopTimeoutMs, emit };
      clearExpiredIdle(layout.idle);
      // The last acquire's pool counts are the running server's: its watcher keeps the pool at them.
      writePoolConfig(layout, opts.pool);
    } finally {
      lock.release();
    }
    await reapOrphanKernels({
      client: serverClient(info, opts.requestTimeoutMs),
      ownersDir: layout.owners,
      signal: scope.signal,
      onReaped: (kernelId, owner) => emit({ type: 'kernel-reaped', kernelId, ownerPid: owner.pid }),
      onFailed: (kernelId, message) => emit({ type: 'reap-failed', kernelId, message }),
    });
    return makeTicket(layout, info, reused, ending, { timeoutMs: opts.startQueueTimeoutMs });
  } catch (error) {
    if (ending) await releaseTicket(layout, { ...ending, graceMs: DEFAULT_STOP_TIMEOUT_MS }, undefined);
    throw error;
  } finally {
    scope.dispose();
  }
}
