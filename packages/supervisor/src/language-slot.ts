import type { ExecuteOptions, ExecuteResult, ReadIsolationPolicy } from '@kernelwarden/core';
import type { CellExecutor } from './executor.js';
import type { Lease, SupervisedKernel } from './lease.js';
import type { SlotSupervisor } from './slot-supervisor.js';

/**
 * What a `KernelSession` hands a `LanguageSlot` on every call: the session's supervisor (the slot keeps its kernel
 * in the supervisor slot named by its `language`), the slot's environment name, and the session's working
 * directory, read-isolation policy, executor and host state.
 *
 * `H` is the session's host-state type (`createHost`).
 */
export interface LanguageSlotContext<H = unknown> {
  /** The session's supervisor; it holds kernels of every type the session's slots start. */
  supervisor: SlotSupervisor;
  /** The environment this language should run in (`slotEnvs[language]`, `setSlotEnv`); `undefined`: the default. */
  env: string | undefined;
  cwd?: string;
  /** The session's read-isolation policy: pass it to every kernel the slot creates. */
  readIsolation?: ReadIsolationPolicy;
  /** The session's executor (the watchdog, or `plainExecutor`). */
  executor: CellExecutor;
  /** A bootstrap for this language's new kernels, when the caller has one (a `KernelSession` passes none). */
  bootstrap?(lease: Lease): Promise<void>;
  /** The session's host-side state (`session.host`). */
  host?: H;
  /** Aborts when the session stops or closes, or the caller gives up. */
  signal?: AbortSignal;
  /** Aborts (just before `signal`) only when the session stops or closes: pass it to the executor as `stopSignal`. */
  stopSignal?: AbortSignal;
}

/** What `LanguageSlot.status()` reports; `KernelSession.status().slots` holds one per language slot. */
export interface LanguageSlotStatus {
  /** The environment of the current kernel (`undefined` for the default, or before the first one). */
  env: string | undefined;
  /** A kernel has been started (and not shut down) in this slot. */
  started: boolean;
  /** The current kernel is alive. */
  alive: boolean;
  /** The slot's generation in the supervisor. */
  generation: number;
  /** The last soft failure, until a later `ensure` succeeds. */
  lastError?: string;
}

/**
 * A language of a session besides Python (R through `createRSlot()` from `@kernelwarden/r-kernel`; any other
 * through `createLanguageSlot()`): lazy, reused while its environment is unchanged, and soft-failing. A session
 * takes them by name (`slots: { r, julia }`) and routes `execute(code, { language })` to the slot of that name,
 * which must equal the slot's `language`; the slot keeps its kernel in the supervisor slot of that name.
 *
 * `ensure` never fails by throwing: it resolves `null` when a kernel is ready, or a message
 * (`'R kernel unavailable: <reason>'`) that the session turns into an `error` result carrying a
 * `KernelUnavailableError` (`ename` from `unavailableName`), without touching any other slot. Only an abort of
 * `ctx.signal` rejects (with its reason); the session turns that into a cancelled cell.
 *
 * `K` is the type of the kernels the slot starts; `H` the session's host-state type.
 */
export interface LanguageSlot<K extends SupervisedKernel = SupervisedKernel, H = unknown> {
  /** The language this slot runs: its name in the session and its supervisor slot. */
  readonly language: string;
  /** The language's name for people (`'R'`, `'Julia'`). @defaultValue `language` with its first letter capitalised */
  readonly label?: string;
  /** The `ename` of the error result made from a soft failure. @defaultValue `` `${label}KernelUnavailable` `` */
  readonly unavailableName?: string;
  /**
   * Makes sure a kernel is ready: `null`, or a soft-failure message. Never throws, except with `ctx.signal`'s reason
   * when it aborts (the session stopped or the caller gave up): that is a cancellation, not a failure, and must
   * leave the slot's state as it was.
   */
  ensure(ctx: LanguageSlotContext<H>): Promise<null | string>;
  /** The slot's current lease, if any. */
  lease(): Lease<K> | undefined;
  /** Runs one cell on the slot's kernel (after a successful `ensure`). */
  execute(code: string, opts: ExecuteOptions, ctx: LanguageSlotContext<H>): Promise<ExecuteResult>;
  /** Shuts the slot's kernel down. */
  shutdown(reason?: string): Promise<void>;
  /** A summary of the slot's state for `KernelSession.status()`. */
  status(): LanguageSlotStatus;
}

/** The label of a language slot: its own, or its language with the first letter capitalised (`'r'` → `'R'`). */
export function slotLabel(slot: Pick<LanguageSlot, 'language' | 'label'>): string {
  return slot.label ?? slot.language.charAt(0).toUpperCase() + slot.language.slice(1);
}

/** The `ename` of a language slot's soft-failure result (`'RKernelUnavailable'`). */
export function unavailableName(slot: Pick<LanguageSlot, 'language' | 'label' | 'unavailableName'>): string {
  return slot.unavailableName ?? `${slotLabel(slot)}KernelUnavailable`;
}
