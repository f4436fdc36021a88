import { type ExecuteOptions, type ExecuteResult, KernelwardenError } from '@kernelwarden/core';
import { NoKernelError } from './errors.js';
import type { LanguageSlot, LanguageSlotContext, LanguageSlotStatus } from './language-slot.js';
import {
  type LanguageSlotOptions,
  type ResolvedLanguageSlotOptions,
  resolveLanguageSlotOptions,
  type SlotSpawnContext,
} from './language-slot-options.js';
import type { Lease, SupervisedKernel } from './lease.js';
import type { SlotSupervisor } from './slot-supervisor.js';

/**
 * Creates a language slot for `new KernelSession({ python, slots: { [language]: slot } })`: the behaviour of the R
 * slot for any language whose kernel `spawn` starts.
 *
 * Nothing starts before the first cell of the language. The kernel lives in the session supervisor's slot named
 * `language`, keyed by the slot's environment (`''` for the default); it is reused while that environment is
 * unchanged and replaced (build first, then the old one is shut down) when it changes. `ensure()` does not throw on
 * failure: a spawn that fails resolves `<label> kernel unavailable: <reason>` and leaves the current kernel, its
 * environment and every other slot as they were. An `ensure()` whose `ctx.signal` aborts (the session stopped while
 * the kernel was starting) rejects with the signal's reason and records nothing, so the session reports a cancelled
 * cell. An execution that throws shuts down exactly the lease it ran on (reason `desynchronized`) and rethrows, so
 * the next cell starts from a fresh kernel instead of a desynchronized one.
 */
export function createLanguageSlot<
  K extends SupervisedKernel = SupervisedKernel,
  H = unknown,
  N extends string = string,
>(options: LanguageSlotOptions<K, H, N>): LanguageSlot<K, H> & { readonly language: N } {
  return new LazyLanguageSlot(resolveLanguageSlotOptions(options));
}

/** The slot `createLanguageSlot()` returns. Internal to the package. */
class LazyLanguageSlot<K extends SupervisedKernel, H, N extends string> implements LanguageSlot<K, H> {
  readonly language: N;
  readonly label: string;
  readonly unavailableName: string;
  readonly #options: ResolvedLanguageSlotOptions<K, H, N>;
  #supervisor: SlotSupervisor | undefined;
  #lastError: string | undefined;

  constructor(options: ResolvedLanguageSlotOptions<K, H, N>) {
    this.#options = options;
    this.language = options.language;
    this.label = options.label;
    this.unavailableName = options.unavailableName;
  }

  async ensure(ctx: LanguageSlotContext<H>): Promise<null | string> {
    this.#supervisor = ctx.supervisor;
    const key = ctx.env ?? '';
    try {
      const { lease, outcome } = await ctx.supervisor.acquire(
        this.language,
        key,
        (build) => this.#options.spawn(spawnContext(ctx, build.signal)),
        ctx.signal ? { signal: ctx.signal } : {},
      );
      const bootstrap = this.#bootstrapFor(ctx);
      if (outcome !== 'reused' && bootstrap) {
        try {
          await bootstrap(lease);
        } catch (error) {
          await ctx.supervisor.shutdownIfCurrent(lease, 'bootstrap_failed');
          // Broken off by a stop's interrupt or the caller: a cancellation, not a soft failure to remember.
          if (ctx.signal?.aborted) throw ctx.signal.reason;
          return this.#fail(`bootstrap failed: ${reasonOf(error)}`);
        }
      }
      this.#lastError = undefined;
      return null;
    } catch (error) {
      if (ctx.signal?.aborted) throw ctx.signal.reason;
      return this.#fail(reasonOf(error));
    }
  }

  lease(): Lease<K> | undefined {
    // Only this slot publishes in its supervisor slot, and only kernels from its own `spawn`.
    return this.#supervisor?.lease(this.language) as Lease<K> | undefined;
  }

  async execute(code: string, opts: ExecuteOptions, ctx: LanguageSlotContext<H>): Promise<ExecuteResult> {
    this.#supervisor = ctx.supervisor;
    const lease = ctx.supervisor.lease(this.language);
    if (!lease) throw new NoKernelError(this.language);
    const bootstrap = this.#bootstrapFor(ctx);
    try {
      return await ctx.executor.run({
        supervisor: ctx.supervisor,
        slot: this.language,
        code,
        lease,
        ...(opts.cellId !== undefined ? { cellId: opts.cellId } : {}),
        ...(opts.origin !== undefined ? { origin: opts.origin } : {}),
        ...(opts.onOutput ? { onOutput: opts.onOutput } : {}),
        ...(opts.onInput ? { onInput: opts.onInput } : {}),
        ...(opts.signal ? { signal: opts.signal } : {}),
        ...(ctx.stopSignal ? { stopSignal: ctx.stopSignal } : {}),
        ...(bootstrap ? { bootstrap } : {}),
      });
    } catch (error) {
      // A cancelled cell (a stop, or the watchdog's ladder after the caller gave up) is not a broken kernel: the
      // stop shuts it down, the ladder already reset or abandoned it.
      if (opts.signal?.aborted && error === opts.signal.reason) throw error;
      // The kernel may be mid-message: never reuse it. Exact-lease: a lease the watchdog already restarted or
      // replaced is stale, and this is then a no-op.
      await ctx.supervisor.shutdownIfCurrent(lease, 'desynchronized');
      throw error;
    }
  }

  async shutdown(reason = 'shutdown'): Promise<void> {
    const lease = this.#supervisor?.lease(this.language);
    if (lease) await this.#supervisor?.shutdownIfCurrent(lease, reason);
  }

  status(): LanguageSlotStatus {
    const s = this.#supervisor?.status(this.language);
    const out: LanguageSlotStatus = {
      env: s?.key === undefined || s.key === '' ? undefined : s.key,
      started: s !== undefined && s.state === 'running',
      alive: s?.alive ?? false,
      generation: s?.generation ?? 0,
    };
    if (this.#lastError !== undefined) out.lastError = this.#lastError;
    return out;
  }

  #fail(reason: string): string {
    this.#lastError = `${this.label} kernel unavailable: ${reason}`;
    return this.#lastError;
  }

  /** The slot's own bootstrap, else the context's; typed for the supervisor's leases, which hold this slot's `K`. */
  #bootstrapFor(ctx: LanguageSlotContext<H>): ((lease: Lease) => Promise<void>) | undefined {
    const own = this.#options.bootstrap as ((lease: Lease) => Promise<void>) | undefined;
    return own ?? ctx.bootstrap?.bind(ctx);
  }
}

function spawnContext<H>(ctx: LanguageSlotContext<H>, signal: AbortSignal): SlotSpawnContext<H> {
  const spawn: SlotSpawnContext<H> = { env: ctx.env, signal };
  if (ctx.cwd !== undefined) spawn.cwd = ctx.cwd;
  if (ctx.readIsolation !== undefined) spawn.readIsolation = ctx.readIsolation;
  if (ctx.host !== undefined) spawn.host = ctx.host;
  return spawn;
}

/** The reason a spawn failed, without the supervisor's wrapping: `R is missing`, not `Failed to build …: R is missing`. */
function reasonOf(error: unknown): string {
  let e: unknown = error;
  while (KernelwardenError.isInstance(e) && e.code === 'KERNEL_FACTORY' && e.cause !== undefined) e = e.cause;
  if (e instanceof Error) return e.message;
  return String(e);
}
