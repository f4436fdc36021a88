import {
  type AbortScope,
  abortScope,
  DeadlineExceededError,
  type ExecuteOptions,
  type ExecuteResult,
} from '@kernelwarden/core';
import { environmentCode } from './environment-code.js';
import { KernelStartError } from './errors.js';
import type { GatewayClient, KernelModel } from './gateway-client.js';
import type { ResolvedGatewayKernelOptions } from './gateway-kernel-options.js';
import type { KernelInfo } from './handshake.js';
import { type Cleanup, deleteUntilConfirmed } from './start-cleanup.js';
import { type StartWatch, watchKernelStart } from './start-watch.js';

/** What the start sequence needs of a kernel it just created. */
export interface StartingKernel {
  /** Opens the channels socket and runs the first handshake. */
  connect(signal: AbortSignal): Promise<void>;
  /** The start watch in force (a death reported on the socket fails it), or undefined once the kernel answered. */
  watch(watch: StartWatch | undefined): void;
  /** The kernel's `kernel_info_reply`, once the handshake completed. */
  readonly info: KernelInfo | undefined;
  /** Runs a cell of the start (not interrupted when the start's signal aborts). */
  step(code: string, opts: ExecuteOptions): Promise<ExecuteResult>;
  /** The start succeeded. */
  ready(): void;
  /** Closes the socket, settles everything pending, and DELETEs the kernel. */
  shutdown(opts: { timeoutMs: number; signal: AbortSignal }): Promise<{ confirmed: boolean }>;
  /** Closes the socket and settles everything pending, leaving the kernel to whoever owns it (no DELETE). */
  abandon(): void;
}

/**
 * Where the start's kernel comes from: a new one (`create`: claimed from the gateway's pool when it has a ready one
 * of the kernelspec, else created over REST), or an existing one the caller names (`attach`; a failed start then
 * leaves it running: it is not the start's to delete).
 */
export type KernelSource = { kind: 'create' } | { kind: 'attach'; kernelId: string };

/** Pool entries tried before a start creates its kernel instead (an entry whose kernel is gone is skipped). */
const CLAIM_ATTEMPTS = 3;

/**
 * The start sequence of `GatewayKernel.start()`: create the kernel (retried on 5xx), open its channels and run the
 * handshake while `watchKernelStart` looks for a death, then the environment step (`cwd`, `env`) and the prelude —
 * all under one deadline (`startupTimeoutMs`) and the caller's signal. Any failure after the kernel exists shuts it
 * down (socket closed, pending settled, DELETE sent); a start that failed on its own waits for that first DELETE, an
 * aborted one rejects at once with the signal's reason, and an unconfirmed DELETE is retried in the background.
 */
export async function startKernel<K>(
  opts: ResolvedGatewayKernelOptions,
  build: (model: KernelModel) => { kernel: K; starting: StartingKernel },
  source: KernelSource = { kind: 'create' },
): Promise<K> {
  const { client, clock, startupTimeoutMs } = opts;
  const scope = abortScope({
    signal: opts.signal,
    timeoutMs: startupTimeoutMs,
    clock,
    timeoutMessage: `Kernel start on ${client.baseUrl} timed out after ${startupTimeoutMs} ms`,
  });
  let starting: StartingKernel | undefined;
  const owned = source.kind === 'create';
  try {
    scope.throwIfAborted();
    const model =
      source.kind === 'attach'
        ? await attachedKernel(client, source.kernelId, scope)
        : ((await claimPooledKernel(client, opts, scope)) ?? (await createKernel(client, opts, scope)));
    const built = build(model);
    const kernel = built.starting;
    starting = kernel;
    const watch = watchKernelStart({ client, kernelId: model.id, kernelName: model.name, clock });
    kernel.watch(watch);
    try {
      await scope.race(Promise.race([kernel.connect(scope.signal), watch.failed]));
    } finally {
      watch.stop();
      kernel.watch(undefined);
    }
    const step = (code: string, opts: ExecuteOptions) => kernel.step(code, opts);
    if (opts.cwd !== undefined || opts.env !== undefined) {
      const code = environmentCode(kernel.info?.language ?? '', opts.cwd, opts.env);
      await runStartStep(step, code, 'environment', scope);
    }
    if (opts.prelude) await runStartStep(step, opts.prelude, 'prelude', scope);
    kernel.ready();
    return built.kernel;
  } catch (error) {
    if (starting && !owned) starting.abandon();
    else if (starting) {
      const doomed = starting;
      const cleanup = startCleanup(opts, async (signal) => (await doomed.shutdown({ timeoutMs: 0, signal })).confirmed);
      // A caller who gave up gets its reason at once; a start that failed on its own waits for the first DELETE.
      if (!opts.signal?.aborted) await cleanup.first;
    }
    throw error;
  } finally {
    scope.dispose();
  }
}

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

/** The model of the existing kernel `kernelId`; `KernelStartError` (status 404) when the gateway does not know it. */
async function attachedKernel(client: GatewayClient, kernelId: string, scope: AbortScope): Promise<KernelModel> {
  const model = await scope.race(client.getKernel(kernelId, { signal: scope.signal }));
  if (!model) {
    throw new KernelStartError(`Failed to attach to kernel ${kernelId}: gateway ${client.baseUrl} has no such kernel`, {
      status: 404,
    });
  }
  return model;
}

/**
 * A ready kernel of the wanted kernelspec claimed from the gateway's pool (this process is then its owner), or
 * undefined when the gateway has no pool or no ready kernel. An entry whose kernel the gateway no longer lists is
 * forgotten and the next one tried. A claimed kernel the start gives up on (its signal aborted) is deleted in the
 * background, as a created one would be.
 */
export async function claimPooledKernel(
  client: GatewayClient,
  opts: Pick<ResolvedGatewayKernelOptions, 'kernelName' | 'clock' | 'cleanupTimeoutMs' | 'cleanupRetry'>,
  scope: AbortScope,
): Promise<KernelModel | undefined> {
  const pool = client.pool;
  if (!pool) return undefined;
  for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
    const kernelId = pool.claim(opts.kernelName);
    if (kernelId === undefined) return undefined;
    const looking = client.getKernel(kernelId);
    let model: KernelModel | undefined;
    try {
      model = await scope.race(looking);
    } catch {
      if (scope.signal.aborted) {
        startCleanup(opts, async (signal) => {
          await client.deleteKernel(kernelId, { timeoutMs: 0, signal });
          return true;
        });
        throw scope.signal.reason;
      }
      // Unreachable for now: its owner record (this process) stays, so the gateway reaps it once this process ends.
      continue;
    }
    if (model?.name === opts.kernelName) return model;
    if (model) await client.deleteKernel(kernelId).catch(() => {});
    else client.ownership?.deleted(kernelId);
  }
  return undefined;
}

/**
 * `POST /api/kernels`, retried while it answers 5xx (`createAttempts`, waiting `createRetryDelayMs` times the
 * attempt). The create itself is not aborted: if the caller gives up while it is in flight, a kernel that gets
 * created anyway is deleted as soon as its id is known (retried until confirmed), instead of leaking.
 */
export async function createKernel(
  client: GatewayClient,
  opts: Pick<
    ResolvedGatewayKernelOptions,
    'kernelName' | 'createAttempts' | 'createRetryDelayMs' | 'clock' | 'cleanupTimeoutMs' | 'cleanupRetry'
  >,
  scope: AbortScope,
): Promise<KernelModel> {
  for (let attempt = 1; ; attempt++) {
    scope.throwIfAborted();
    const creating = client.createKernel({ name: opts.kernelName });
    try {
      return await scope.race(creating);
    } catch (error) {
      if (scope.signal.aborted) {
        creating.then(
          (model) =>
            startCleanup(opts, async (signal) => {
              await client.deleteKernel(model.id, { timeoutMs: 0, signal });
              return true;
            }),
          () => {},
        );
        throw scope.signal.reason;
      }
      const retry = KernelStartError.isInstance(error) && error.retryable && attempt < opts.createAttempts;
      if (!retry) throw error;
    }
    await new Promise<void>((resolve, reject) => {
      const timer = opts.clock.setTimer(resolve, opts.createRetryDelayMs * attempt);
      scope.signal.addEventListener(
        'abort',
        () => {
          timer.cancel();
          reject(scope.signal.reason);
        },
        { once: true },
      );
    });
  }
}

/**
 * Runs one step of the start (the environment step or the prelude) as a cell under the start's deadline. A step cut
 * by the deadline rejects with `TimeoutError` `Failed to initialize kernel <step>`; one cut by the caller's abort
 * with its reason; one that raised with `KernelStartError`.
 */
export async function runStartStep(
  execute: (code: string, opts: ExecuteOptions) => Promise<ExecuteResult>,
  code: string,
  step: 'environment' | 'prelude',
  scope: AbortScope,
): Promise<void> {
  const result = await execute(code, { signal: scope.signal, silent: step === 'environment', storeHistory: false });
  if (result.cancelled) {
    if (scope.timedOut) {
      throw new DeadlineExceededError(`Failed to initialize kernel ${step}`, { cause: scope.signal.reason });
    }
    throw scope.signal.reason;
  }
  if (result.status !== 'ok') {
    const why = result.error ? `: ${result.error.ename}: ${result.error.evalue}` : ` (status ${result.status})`;
    throw new KernelStartError(`Failed to initialize kernel ${step}${why}`);
  }
}
