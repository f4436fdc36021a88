import { isTimeoutError } from '@kernelwarden/core';
import type { LanguageSlot, LanguageSlotContext, Lease, SupervisedKernel } from '@kernelwarden/supervisor';

/** The supervisor slot the R kernel lives in (the session holds `slot.language`). */
const R_SLOT = 'r';

/**
 * A minimal R `LanguageSlot` — lazy, reused per R environment, soft-failing — used until `@kernelwarden/r-kernel`
 * ships `createRSlot()`, which replaces it one for one.
 */
export function interimRSlot<K extends SupervisedKernel>(
  spawn: (ctx: LanguageSlotContext & { signal: AbortSignal }) => Promise<K>,
): LanguageSlot {
  let supervisor: LanguageSlotContext['supervisor'] | undefined;
  return {
    language: R_SLOT,
    unavailableName: 'RKernelUnavailable',
    async ensure(ctx) {
      supervisor = ctx.supervisor;
      try {
        await ctx.supervisor.ensure(R_SLOT, ctx.env ?? 'default', (build) => spawn({ ...ctx, signal: build.signal }));
        return null;
      } catch (error) {
        return `R kernel unavailable: ${error instanceof Error ? error.message : String(error)}`;
      }
    },
    lease: () => supervisor?.lease(R_SLOT),
    async execute(code, opts, ctx) {
      const lease: Lease<any> | undefined = ctx.supervisor.lease(R_SLOT);
      try {
        return await ctx.executor.run({
          supervisor: ctx.supervisor,
          slot: R_SLOT,
          code,
          ...(lease ? { lease } : {}),
          ...(opts.cellId === undefined ? {} : { cellId: opts.cellId }),
          ...(opts.origin === undefined ? {} : { origin: opts.origin }),
          ...(opts.onOutput ? { onOutput: opts.onOutput } : {}),
          ...(opts.onInput ? { onInput: opts.onInput } : {}),
          ...(opts.signal ? { signal: opts.signal } : {}),
        });
      } catch (error) {
        // A kernel that threw mid-cell is out of step with us: drop exactly that lease (the watchdog already
        // recovered a timed-out one, and a caller's abort is not the kernel's fault).
        if (lease && !isTimeoutError(error) && !opts.signal?.aborted) {
          await ctx.supervisor.shutdownIfCurrent(lease, 'desynchronized');
        }
        throw error;
      }
    },
    async shutdown(reason) {
      await supervisor?.stop(R_SLOT, { reason: reason ?? 'shutdown', manual: false });
    },
    status: () => supervisor?.status(R_SLOT),
  };
}
