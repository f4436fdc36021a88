import {
  type AbortScope,
  abortScope,
  DeadlineExceededError,
  type ExecuteOptions,
  type ExecuteResult,
} from '@kernelwarden/core';
import { environmentCode, environmentCodeAhead } from './environment-code.js';
import { GatewayBusyError, GatewayCapacityError, GatewayUnavailableError, KernelStartError } from './errors.js';
import type { GatewayClient, GatewayRouter, KernelModel } from './gateway-client.js';
import type { ResolvedGatewayKernelOptions } from './gateway-kernel-options.js';
import type { KernelInfo } from './handshake.js';
import { createKernel, startCleanup } from './kernel-create.js';
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
  /**
   * Sends the environment step without waiting for it: if it fails, the kernel refuses every execution with its
   * `KernelStartError` (the unsettled ones included).
   */
  stepAhead(code: string): void;
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
 * all under one deadline (`startupTimeoutMs`) and the caller's signal. On a gateway with a start queue
 * (`client.startQueue`, the embedded gateway), the time the create waited for its turn (`kernelwarden_queued_ms` in
 * its answer) is not part of that deadline: it is bounded by the queue's own timeout. A deadline that runs out before
 * a kernel was created or answered rejects with `GatewayBusyError`. Any failure after the kernel exists shuts it down
 * (socket closed, pending settled, DELETE sent); a start that failed on its own waits for that first DELETE, an
 * aborted one rejects at once with the signal's reason, and an unconfirmed DELETE is retried in the background.
 */
export async function startKernel<K>(
  opts: ResolvedGatewayKernelOptions,
  build: (model: KernelModel) => { kernel: K; starting: StartingKernel },
  source: KernelSource = { kind: 'create' },
): Promise<K> {
  const { client, clock, startupTimeoutMs } = opts;
  const timeoutMessage = `Kernel start on ${client.baseUrl} timed out after ${startupTimeoutMs} ms`;
  // On a gateway with a start queue, the wait for a turn is bounded by the queue's own timeout, not startupTimeoutMs.
  const queueMs = source.kind === 'create' && startupTimeoutMs > 0 ? (client.startQueue?.timeoutMs ?? 0) : 0;
  const began = clock.now();
  const outer = abortScope({
    signal: opts.signal,
    timeoutMs: startupTimeoutMs > 0 ? startupTimeoutMs + queueMs : 0,
    clock,
    timeoutMessage,
  });
  let scope = outer;
  let starting: StartingKernel | undefined;
  const owned = source.kind === 'create';
  // The create guard's hold on the created kernel: released once the start returned it or cleaned it up.
  let release: (() => void) | undefined;
  try {
    scope.throwIfAborted();
    const model =
      source.kind === 'attach'
        ? await attachedKernel(client, source.kernelId, scope)
        : ((await claimPooledKernel(client, opts, scope)) ??
          (await createKernel(client, opts, scope, queueMs > 0 ? queueMs : undefined, (r) => {
            release = r;
          })));
    if (queueMs > 0) {
      // What is left of startupTimeoutMs once the time the create waited in the queue (as the gateway says) is off.
      const queued = typeof model.kernelwarden_queued_ms === 'number' ? model.kernelwarden_queued_ms : 0;
      const used = clock.now() - began - Math.min(Math.max(0, queued), queueMs);
      scope = abortScope({
        signal: outer.signal,
        timeoutMs: Math.max(1, startupTimeoutMs - used),
        clock,
        timeoutMessage,
      });
    }
    const built = build(model);
    const kernel = built.starting;
    starting = kernel;
    await firstAnswer(opts, kernel, model, scope);
    await runStartSteps(opts, kernel, scope);
    kernel.ready();
    release?.();
    return built.kernel;
  } catch (error) {
    if (starting && !owned) starting.abandon();
    else if (starting) {
      const doomed = starting;
      const cleanup = startCleanup(opts, async (signal) => (await doomed.shutdown({ timeoutMs: 0, signal })).confirmed);
      const held = release;
      if (held) void cleanup.done.then(held);
      // A caller who gave up gets its reason at once; a start that failed on its own waits for the first DELETE.
      if (!opts.signal?.aborted) await cleanup.first;
    } else release?.();
    throw error;
  } finally {
    scope.dispose();
    outer.dispose();
  }
}

/**
 * Connects the created kernel and runs its first handshake while `watchKernelStart` looks for a death. A deadline
 * that runs out meanwhile rejects with `GatewayBusyError`.
 */
async function firstAnswer(
  opts: ResolvedGatewayKernelOptions,
  kernel: StartingKernel,
  model: KernelModel,
  scope: AbortScope,
): Promise<void> {
  const { client, clock, startupTimeoutMs } = opts;
  const watch = watchKernelStart({ client, kernelId: model.id, kernelName: model.name, clock });
  kernel.watch(watch);
  try {
    await scope.race(Promise.race([kernel.connect(scope.signal), watch.failed]));
  } catch (error) {
    if (scope.timedOut && error === scope.signal.reason) {
      throw new GatewayBusyError(
        `Kernel start on ${client.baseUrl} timed out after ${startupTimeoutMs} ms waiting for kernel ${model.id} to answer its first request (the machine is busy starting other kernels); the kernel was deleted`,
        { timeoutMs: startupTimeoutMs, waitedMs: startupTimeoutMs, cause: error },
      );
    }
    throw error;
  } finally {
    watch.stop();
    kernel.watch(undefined);
  }
}

/** The start's cells: the environment step (with `cwd` or `env`), then the prelude (when given). */
async function runStartSteps(
  opts: ResolvedGatewayKernelOptions,
  kernel: StartingKernel,
  scope: AbortScope,
): Promise<void> {
  const step = (code: string, opts: ExecuteOptions) => kernel.step(code, opts);
  if (opts.cwd !== undefined || opts.env !== undefined) {
    if (opts.environmentStep === 'ahead' && !opts.prelude && kernel.info?.content.implementation === 'ipython') {
      kernel.stepAhead(environmentCodeAhead(opts.cwd, opts.env));
    } else {
      const code = environmentCode(kernel.info?.language ?? '', opts.cwd, opts.env);
      await runStartStep(step, code, 'environment', scope);
    }
  }
  if (opts.prelude) await runStartStep(step, opts.prelude, 'prelude', scope);
}

/**
 * A start on a `GatewaySet`: on the gateway its placement chooses; a gateway that cannot be reached (counted against
 * its health) or is at capacity is left for the next candidate, all under the one `startupTimeoutMs`. When no
 * candidate is left, the last gateway's error is thrown (`GatewayCapacityError` when every gateway was full). The
 * kernel that starts is the set's: counted for placement, failed with `GatewayDownError` if its gateway goes down.
 */
export async function startPlaced<
  K extends { readonly id: string; isAlive(): boolean; gatewayDown(cause?: unknown): void },
>(
  router: GatewayRouter,
  opts: ResolvedGatewayKernelOptions,
  start: (opts: ResolvedGatewayKernelOptions) => Promise<K>,
): Promise<K> {
  const { clock, startupTimeoutMs } = opts;
  const began = clock.now();
  const tried = new Set<GatewayClient>();
  let last: unknown;
  for (;;) {
    opts.signal?.throwIfAborted();
    const left = startupTimeoutMs > 0 ? startupTimeoutMs - (clock.now() - began) : 0;
    if (startupTimeoutMs > 0 && left <= 0) {
      throw (
        last ??
        new GatewayBusyError(`Kernel start on the ${router.label} timed out after ${startupTimeoutMs} ms`, {
          timeoutMs: startupTimeoutMs,
        })
      );
    }
    let client: GatewayClient;
    try {
      client = await router.placeKernel({ kernelName: opts.kernelName }, tried);
    } catch (error) {
      throw last ?? error;
    }
    tried.add(client);
    try {
      const kernel = await start(Object.freeze({ ...opts, client, startupTimeoutMs: left }));
      router.settled(client, { kernel });
      return kernel;
    } catch (error) {
      const unreachable = GatewayUnavailableError.isInstance(error) ? error : undefined;
      router.settled(client, unreachable ? { unreachable } : {});
      if (opts.signal?.aborted || !(unreachable || GatewayCapacityError.isInstance(error))) throw error;
      last = error;
    }
  }
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
  if (result.status !== 'ok') throw startStepError(step, result);
}

/** The error of a start step whose cell did not end `ok`. */
export function startStepError(step: 'environment' | 'prelude', result: ExecuteResult): KernelStartError {
  const why = result.error ? `: ${result.error.ename}: ${result.error.evalue}` : ` (status ${result.status})`;
  return new KernelStartError(`Failed to initialize kernel ${step}${why}`);
}
