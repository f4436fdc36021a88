// A start's create: `POST /api/kernels` retried on 5xx under the start's deadline, sent through the create guard
// when it runs, and a create given up on deleted whatever the server made of it.
import { randomUUID } from 'node:crypto';
import { type AbortScope, type Clock, DeadlineExceededError } from '@kernelwarden/core';
import { CREATE_GUARD_READY_TIMEOUT_MS, type CreateTicket, guardsCreates, openCreateTicket } from './create-guard.js';
import { GatewayBusyError, GatewayCapacityError, KernelStartError } from './errors.js';
import type { GatewayClient, KernelModel } from './gateway-client.js';
import type { ResolvedGatewayKernelOptions } from './gateway-kernel-options.js';
import { type Cleanup, deleteUntilConfirmed } from './start-cleanup.js';

/**
 * Deletes a kernel left by a failed start until the gateway confirms it, in the background, as the start options
 * say (`cleanupTimeoutMs`, `cleanupRetry`, on the kernel's clock).
 */
export function startCleanup(
  opts: Pick<ResolvedGatewayKernelOptions, 'clock' | 'cleanupTimeoutMs' | 'cleanupRetry'>,
  attemptDelete: (signal: AbortSignal) => Promise<boolean>,
): Cleanup {
  return deleteUntilConfirmed(attemptDelete, {
    clock: opts.clock,
    timeoutMs: opts.cleanupTimeoutMs,
    retry: opts.cleanupRetry,
  });
}

/** Of a start's remaining time, what the create leaves for connecting and the first handshake: a quarter, at most 5 s. */
function queueWaitMs(remaining: number): number | undefined {
  if (!Number.isFinite(remaining)) return undefined;
  return Math.max(0, remaining - Math.min(5_000, remaining / 4));
}

/**
 * `POST /api/kernels`, retried while it answers 5xx (`createAttempts`, waiting `createRetryDelayMs` times the
 * attempt). The create waits as long as the start's own deadline allows (`startupTimeoutMs`), not the client's
 * per-request deadline: a server starting many kernels at once answers late. Each create asks for a fresh id
 * (`kernel_id`, honoured by jupyter-server 2.x and the embedded gateway) and tells the embedded gateway's start
 * queue how long it may wait (`kernelwarden_wait_ms`): `queueTimeoutMs` when the client knows the gateway's start queue
 * (`client.startQueue`; the start's deadline then has that much more room for the wait), else what the start's
 * deadline leaves once connecting is provided for. The same share of the deadline is sent as `KERNEL_LAUNCH_TIMEOUT`
 * (whole seconds), so that Enterprise Gateway gives up on a launch (HTTP 500, kernel killed, `GatewayBusyError`)
 * before the start would; `launchEnv` goes with the create as its `env`, with `KERNEL_ID` (the create's id, also sent
 * as `kernel_id`) and `KERNEL_USERNAME`.
 *
 * A create the start gives up on (its deadline, the caller's abort) leaves nothing behind: `abandonCreate` deletes
 * the kernel by its chosen id at once and, since a server that ignores the id (jupyter-server 1.x) names its kernel
 * only in its answer, keeps waiting for that answer and deletes the kernel it names. A start whose deadline ran out
 * while its create was unanswered rejects with `GatewayBusyError` (`GATEWAY_BUSY`, retryable); a gateway at its
 * kernel limit answers with `GatewayCapacityError` (`GATEWAY_CAPACITY`, retryable), neither retried here.
 *
 * With `client.createGuard` (and `globalThis.fetch` not replaced since load: see `guardsCreates`), each attempt's
 * request is sent by the create guard's process (`openCreateTicket`, see `guardTicket`), which deletes the kernel
 * should this process exit first. The guard holds a created kernel until `hold`'s release is called (the start
 * returned it or cleaned it up); without `hold`, until the create returns. A create given up on is held until
 * `abandonCreate` is done with it.
 */
export async function createKernel(
  client: GatewayClient,
  opts: Pick<
    ResolvedGatewayKernelOptions,
    | 'kernelName'
    | 'createAttempts'
    | 'createRetryDelayMs'
    | 'clock'
    | 'cleanupTimeoutMs'
    | 'cleanupRetry'
    | 'abandonedCreateWaitMs'
    | 'startupTimeoutMs'
  > & { launchEnv?: ResolvedGatewayKernelOptions['launchEnv'] },
  scope: AbortScope,
  queueTimeoutMs?: number,
  hold?: (release: () => void) => void,
): Promise<KernelModel> {
  for (let attempt = 1; ; attempt++) {
    scope.throwIfAborted();
    const ticket = guardsCreates(client) ? await guardTicket(opts, scope) : undefined;
    const kernelId = randomUUID();
    const launchTimeoutMs = queueWaitMs(scope.remaining());
    const waitMs = queueTimeoutMs ?? launchTimeoutMs;
    // Not bound by the start: a create given up on is still awaited for a while (see `abandonCreate`).
    const late = new AbortController();
    const creating = client.createKernel(
      {
        name: opts.kernelName,
        kernelId,
        ...(opts.launchEnv === undefined ? {} : { env: { ...opts.launchEnv } }),
        ...(waitMs === undefined ? {} : { waitMs }),
        ...(launchTimeoutMs === undefined ? {} : { launchTimeoutMs }),
      },
      { timeoutMs: 0, signal: late.signal, ...(ticket ? { transport: ticket.request } : {}) },
    );
    try {
      const model = await scope.race(creating);
      if (ticket && hold) hold(ticket.release);
      else ticket?.release();
      return model;
    } catch (error) {
      if (scope.signal.aborted) {
        abandonCreate(client, opts, kernelId, creating, late, ticket?.release);
        if (scope.timedOut) {
          throw new GatewayBusyError(
            `Kernel start on ${client.baseUrl} timed out after ${opts.startupTimeoutMs} ms waiting for the gateway to create its kernel (busy starting other kernels); nothing was left running`,
            { timeoutMs: opts.startupTimeoutMs, waitedMs: opts.startupTimeoutMs, cause: scope.signal.reason },
          );
        }
        throw scope.signal.reason;
      }
      // No HTTP answer (a lost connection): the kernel may exist under the chosen id.
      if (!KernelStartError.isInstance(error) && !GatewayBusyError.isInstance(error)) {
        abandonCreate(client, opts, kernelId, creating, late, ticket?.release);
      } else ticket?.release();
      const retry =
        KernelStartError.isInstance(error) &&
        !GatewayCapacityError.isInstance(error) &&
        error.retryable &&
        attempt < opts.createAttempts;
      if (!retry) throw error;
    }
    await retryDelay(opts.clock, scope, opts.createRetryDelayMs * attempt);
  }
}

/** Waits `delayMs` on `clock` before the next create; rejects with the reason when `scope` aborts first. */
function retryDelay(clock: Clock, scope: AbortScope, delayMs: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      timer.cancel();
      reject(scope.signal.reason);
    };
    const timer = clock.setTimer(() => {
      scope.signal.removeEventListener('abort', onAbort);
      resolve();
    }, delayMs);
    scope.signal.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Makes sure a create nobody waits for leaves no kernel: DELETEs its chosen id now (the embedded gateway drops a
 * create still in its queue; jupyter-server 2.x deletes a kernel it already lists; an unknown id answers 404), then
 * once the create answers (within `abandonedCreateWaitMs`, so its answer names the kernel even on a server that
 * ignored the id), DELETEs the kernel it names, each retried until confirmed (`cleanupTimeoutMs`, `cleanupRetry`).
 * A create still unanswered after `abandonedCreateWaitMs` is dropped (`late` aborts the request) and its chosen id
 * deleted once more: a kernel the server starts after that under another id is left to `LocalGateway`'s orphan
 * sweep.
 */
export function abandonCreate(
  client: GatewayClient,
  opts: Pick<ResolvedGatewayKernelOptions, 'clock' | 'cleanupTimeoutMs' | 'cleanupRetry' | 'abandonedCreateWaitMs'>,
  kernelId: string,
  creating: Promise<KernelModel>,
  late?: AbortController,
  settled?: () => void,
): void {
  const cleanups: Promise<boolean>[] = [];
  const remove = (id: string) => {
    const cleanup = startCleanup(opts, async (signal) => {
      await client.deleteKernel(id, { timeoutMs: 0, signal });
      return true;
    });
    cleanups.push(cleanup.done);
  };
  remove(kernelId);
  const waitMs = opts.abandonedCreateWaitMs;
  const drop =
    late && waitMs > 0
      ? opts.clock.setTimer(() => {
          late.abort(
            new DeadlineExceededError(
              `The abandoned create of kernel ${kernelId} on ${client.baseUrl} was not answered within ${waitMs} ms (abandonedCreateWaitMs)`,
              { timeoutMs: waitMs },
            ),
          );
          remove(kernelId);
        }, waitMs)
      : undefined;
  const answered = creating.then(
    (model) => {
      drop?.cancel();
      remove(model.id);
    },
    () => drop?.cancel(),
  );
  // Every DELETE started by then is done (the create's answer, or its drop, comes first).
  if (settled) void answered.then(() => Promise.all(cleanups)).then(settled, settled);
}

/**
 * A create guard ticket for one create attempt (undefined when the guard cannot run), once the guard is up or a
 * quarter of what the start's deadline leaves (at most `CREATE_GUARD_READY_TIMEOUT_MS`) has passed waiting for it: a
 * start too short to wait sends its create itself, which the guard then only watches. One that comes after the start
 * gave up is released at once.
 */
async function guardTicket(
  opts: Pick<ResolvedGatewayKernelOptions, 'cleanupTimeoutMs' | 'cleanupRetry' | 'abandonedCreateWaitMs'>,
  scope: AbortScope,
): Promise<CreateTicket | undefined> {
  const ticket = openCreateTicket({
    waitMs: opts.abandonedCreateWaitMs,
    cleanupTimeoutMs: opts.cleanupTimeoutMs,
    cleanupRetry: opts.cleanupRetry,
  });
  if (!ticket) return undefined;
  const remaining = scope.remaining();
  const waitMs = Number.isFinite(remaining)
    ? Math.min(CREATE_GUARD_READY_TIMEOUT_MS, remaining / 4)
    : CREATE_GUARD_READY_TIMEOUT_MS;
  try {
    await scope.race(ticket.waitForGuard(waitMs));
    return ticket;
  } catch (error) {
    ticket.release();
    throw error;
  }
}
