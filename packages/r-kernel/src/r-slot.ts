import { InvalidOptionsError, KernelwardenError, type ReadIsolationPolicy } from '@kernelwarden/core';
import type {
  KernelSupervisor,
  LanguageSlot,
  LanguageSlotContext,
  Lease,
  SupervisedKernel,
} from '@kernelwarden/supervisor';
import { NoKernelError } from '@kernelwarden/supervisor';

/** The supervisor slot the R kernel lives in. */
export const R_SLOT = 'r';

/** What `spawn` is told when the R slot needs a kernel. */
export interface RSpawnContext {
  /** The R environment name (the session's `rEnv`); `undefined` means the default R. */
  env: string | undefined;
  /** The session's working directory. */
  cwd?: string;
  /** The session's read-isolation policy: the spawned kernel must run under it. */
  readIsolation?: ReadIsolationPolicy;
  /** Aborts when the kernel is no longer wanted (stop, close, superseded). */
  signal: AbortSignal;
  /** The session's host-side state. */
  host?: unknown;
}

/** Options of `createRSlot()`. */
export interface RSlotOptions<K extends SupervisedKernel = SupervisedKernel> {
  /** Starts one R kernel (usually `startIRKernel`); a throw becomes `R kernel unavailable: <its message>`. */
  spawn: (ctx: RSpawnContext) => K | Promise<K>;
  /** Runs after every new R generation (new kernel, and the watchdog's restarts); a failure discards that kernel. */
  bootstrap?: (lease: Lease<K>) => Promise<void>;
}

/** What `RSlot.status()` reports. */
export interface RSlotStatus {
  /** The R environment of the current kernel (`undefined` for the default or before the first one). */
  env: string | undefined;
  /** A kernel has been started (and not shut down) in this slot. */
  started: boolean;
  alive: boolean;
  generation: number;
  /** The last soft failure, until a later `ensure` succeeds. */
  lastError?: string;
}

/** The R slot of a `KernelSession`: lazy, reused, replaced on environment change, soft-failing. */
export interface RSlot<K extends SupervisedKernel = SupervisedKernel> extends LanguageSlot {
  readonly language: 'r';
  lease(): Lease<K> | undefined;
  status(): RSlotStatus;
}

/**
 * Creates the R slot for `new KernelSession({ python, r: createRSlot({ spawn }) })`.
 *
 * Nothing starts before the first R cell. The kernel is reused while the session's R environment is unchanged and
 * replaced (build first, then the old one is shut down) when it changes. `ensure()` does not throw on failure: a
 * spawn that fails resolves `R kernel unavailable: <reason>` and leaves the current R kernel, its environment and
 * every other slot as they were. An `ensure()` whose `ctx.signal` aborts (the session stopped while R was starting)
 * rejects with the signal's reason and records nothing, so the session reports a cancelled cell. An R execution that throws shuts down exactly the lease it ran on (reason `desynchronized`) and
 * rethrows, so the next R cell starts from a fresh kernel instead of a desynchronized one.
 */
export function createRSlot<K extends SupervisedKernel = SupervisedKernel>(options: RSlotOptions<K>): RSlot<K> {
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionsError([{ path: 'options', message: 'expected { spawn, bootstrap? }' }], {
      subject: 'R slot options',
    });
  }
  if (typeof options.spawn !== 'function') {
    throw new InvalidOptionsError([{ path: 'options.spawn', message: 'expected a function' }], {
      subject: 'R slot options',
    });
  }
  if (options.bootstrap !== undefined && typeof options.bootstrap !== 'function') {
    throw new InvalidOptionsError([{ path: 'options.bootstrap', message: 'expected a function' }], {
      subject: 'R slot options',
    });
  }
  const { spawn } = options;
  let supervisor: KernelSupervisor<any> | undefined;
  let lastError: string | undefined;

  const bootstrapFor = (ctx: LanguageSlotContext) =>
    (options.bootstrap as ((lease: Lease<any>) => Promise<void>) | undefined) ?? ctx.bootstrap;

  const slot: RSlot<K> = {
    language: 'r',
    unavailableName: 'RKernelUnavailable',

    async ensure(ctx) {
      supervisor = ctx.supervisor;
      const key = ctx.env ?? '';
      try {
        const { lease, outcome } = await ctx.supervisor.acquire(
          R_SLOT,
          key,
          (build) => {
            const spawnCtx: RSpawnContext = { env: ctx.env, signal: build.signal };
            if (ctx.cwd !== undefined) spawnCtx.cwd = ctx.cwd;
            if (ctx.readIsolation !== undefined) spawnCtx.readIsolation = ctx.readIsolation;
            if (ctx.host !== undefined) spawnCtx.host = ctx.host;
            return spawn(spawnCtx);
          },
          ctx.signal ? { signal: ctx.signal } : {},
        );
        const bootstrap = bootstrapFor(ctx);
        if (outcome !== 'reused' && bootstrap) {
          try {
            await bootstrap(lease);
          } catch (error) {
            await ctx.supervisor.shutdownIfCurrent(lease, 'bootstrap_failed');
            // Broken off by a stop's interrupt or the caller: a cancellation, not a soft failure to remember.
            if (ctx.signal?.aborted) throw ctx.signal.reason;
            lastError = `R kernel unavailable: bootstrap failed: ${reasonOf(error)}`;
            return lastError;
          }
        }
        lastError = undefined;
        return null;
      } catch (error) {
        if (ctx.signal?.aborted) throw ctx.signal.reason;
        lastError = `R kernel unavailable: ${reasonOf(error)}`;
        return lastError;
      }
    },

    lease() {
      return supervisor?.lease(R_SLOT) as Lease<K> | undefined;
    },

    async execute(code, opts, ctx) {
      supervisor = ctx.supervisor;
      const lease = ctx.supervisor.lease(R_SLOT);
      if (!lease) throw new NoKernelError(R_SLOT);
      try {
        return await ctx.executor.run({
          supervisor: ctx.supervisor,
          slot: R_SLOT,
          code,
          lease,
          ...(opts.cellId !== undefined ? { cellId: opts.cellId } : {}),
          ...(opts.origin !== undefined ? { origin: opts.origin } : {}),
          ...(opts.onOutput ? { onOutput: opts.onOutput } : {}),
          ...(opts.onInput ? { onInput: opts.onInput } : {}),
          ...(opts.signal ? { signal: opts.signal } : {}),
          ...(ctx.stopSignal ? { stopSignal: ctx.stopSignal } : {}),
          ...(bootstrapFor(ctx) ? { bootstrap: bootstrapFor(ctx)! } : {}),
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
    },

    async shutdown(reason = 'shutdown') {
      const lease = supervisor?.lease(R_SLOT);
      if (lease) await supervisor!.shutdownIfCurrent(lease, reason);
    },

    status() {
      const s = supervisor?.status(R_SLOT);
      const out: RSlotStatus = {
        env: s?.key === undefined || s.key === '' ? undefined : s.key,
        started: s !== undefined && s.state === 'running',
        alive: s?.alive ?? false,
        generation: s?.generation ?? 0,
      };
      if (lastError !== undefined) out.lastError = lastError;
      return out;
    },
  };
  return slot;
}

/** The reason a spawn failed, without the supervisor's wrapping: `R is missing`, not `Failed to build …: R is missing`. */
function reasonOf(error: unknown): string {
  let e: unknown = error;
  while (KernelwardenError.isInstance(e) && e.code === 'KERNEL_FACTORY' && e.cause !== undefined) e = e.cause;
  if (e instanceof Error) return e.message;
  return String(e);
}
