import { parseOptions } from '@kernelwarden/core';
import {
  createLanguageSlot,
  type LanguageSlot,
  type LanguageSlotStatus,
  type Lease,
  type SlotSpawnContext,
  type SupervisedKernel,
} from '@kernelwarden/supervisor';
import { z } from 'zod/v3';

/** The supervisor slot the R kernel lives in, and the language name of R cells (`execute(code, { language })`). */
export const R_SLOT = 'r';
/** The `ename` of the error result a cell gets when the R kernel cannot start. */
export const R_UNAVAILABLE_NAME = 'RKernelUnavailable';

/** What `spawn` is told when the R slot needs a kernel; `env` is the session's R environment. */
export type RSpawnContext<H = unknown> = SlotSpawnContext<H>;

/** Options of `createRSlot()`. */
export interface RSlotOptions<K extends SupervisedKernel = SupervisedKernel, H = unknown> {
  /** Starts one R kernel (usually `startIRKernel`); a throw becomes `R kernel unavailable: <its message>`. */
  spawn: (ctx: RSpawnContext<H>) => K | Promise<K>;
  /** Runs after every new R generation (new kernel, and the watchdog's restarts); a failure discards that kernel. */
  bootstrap?: (lease: Lease<K>) => Promise<void>;
}

/** What `RSlot.status()` reports: a language slot's status. */
export type RSlotStatus = LanguageSlotStatus;

/** The R slot of a `KernelSession`: lazy, reused, replaced on environment change, soft-failing. */
export interface RSlot<K extends SupervisedKernel = SupervisedKernel, H = unknown> extends LanguageSlot<K, H> {
  readonly language: 'r';
  status(): RSlotStatus;
}

const fn = z.custom<(...args: never[]) => unknown>((value) => typeof value === 'function', 'expected a function');
const rSlotOptionsSchema = z.object(
  { spawn: fn, bootstrap: fn.optional() },
  { message: 'expected { spawn, bootstrap? }' },
);

/**
 * Creates the R slot for `new KernelSession({ python, r: createRSlot({ spawn }) })`: `createLanguageSlot()` from
 * the supervisor for `language: 'r'`, with R's name in its messages and `ename: 'RKernelUnavailable'`.
 *
 * Nothing starts before the first R cell. The kernel is reused while the session's R environment is unchanged and
 * replaced (build first, then the old one is shut down) when it changes. `ensure()` does not throw on failure: a
 * spawn that fails resolves `R kernel unavailable: <reason>` and leaves the current R kernel, its environment and
 * every other slot as they were. An `ensure()` whose `ctx.signal` aborts (the session stopped while R was starting)
 * rejects with the signal's reason and records nothing, so the session reports a cancelled cell. An R execution
 * that throws shuts down exactly the lease it ran on (reason `desynchronized`) and rethrows, so the next R cell
 * starts from a fresh kernel instead of a desynchronized one.
 */
export function createRSlot<K extends SupervisedKernel = SupervisedKernel, H = unknown>(
  options: RSlotOptions<K, H>,
): RSlot<K, H> {
  parseOptions(rSlotOptionsSchema, options, { subject: 'R slot options', root: 'options' });
  return createLanguageSlot<K, H, typeof R_SLOT>({
    language: R_SLOT,
    label: 'R',
    unavailableName: R_UNAVAILABLE_NAME,
    spawn: options.spawn,
    ...(options.bootstrap ? { bootstrap: options.bootstrap } : {}),
  });
}
