import type { ExecuteOptions, ExecuteResult, ReadIsolationPolicy } from '@kernelwarden/core';
import type { CellExecutor } from './executor.js';
import type { Lease } from './lease.js';
import type { KernelSupervisor } from './supervisor.js';

/**
 * What a `KernelSession` hands a `LanguageSlot` on every call: the session's supervisor (the slot keeps its kernel
 * in a supervisor slot of its own, e.g. `'r'`), the slot's environment name, and the session's working directory,
 * read-isolation policy, executor and host state.
 */
export interface LanguageSlotContext {
  supervisor: KernelSupervisor<any>;
  /** The environment this language should run in (the session's `rEnv`); `undefined` means the default. */
  env: string | undefined;
  cwd?: string;
  /** The session's read-isolation policy: pass it to every kernel the slot creates. */
  readIsolation?: ReadIsolationPolicy;
  /** The session's executor (the watchdog, or `plainExecutor`). */
  executor: CellExecutor;
  /** The session's bootstrap for this language, if any. */
  bootstrap?: (lease: Lease<any>) => Promise<void>;
  /** The session's host-side state (`session.host`). */
  host?: unknown;
  /** Aborts when the session stops or closes, or the caller gives up. */
  signal?: AbortSignal;
  /** Aborts (just before `signal`) only when the session stops or closes: pass it to the executor as `stopSignal`. */
  stopSignal?: AbortSignal;
}

/**
 * A second language in a session (R through `createRSlot()` from `@kernelwarden/r-kernel`): lazy, reused while its
 * environment is unchanged, and soft-failing.
 *
 * `ensure` never fails by throwing: it resolves `null` when a kernel is ready, or a message
 * (`'R kernel unavailable: <reason>'`) that the session turns into an `error` result with `ename` from
 * `unavailableName`, without touching any other slot. Only an abort of `ctx.signal` rejects (with its reason); the
 * session turns that into a cancelled cell.
 */
export interface LanguageSlot {
  /** The language this slot runs; `KernelSession.execute(code, { language })` routes by it. */
  readonly language: string;
  /** The `ename` of the error result made from a soft failure. @defaultValue `'RKernelUnavailable'` for `'r'`. */
  readonly unavailableName?: string;
  /**
   * Makes sure a kernel is ready: `null`, or a soft-failure message. Never throws, except with `ctx.signal`'s reason
   * when it aborts (the session stopped or the caller gave up): that is a cancellation, not a failure, and must
   * leave the slot's state as it was.
   */
  ensure(ctx: LanguageSlotContext): Promise<null | string>;
  /** The slot's current lease, if any. */
  lease(): Lease<any> | undefined;
  /** Runs one cell on the slot's kernel (after a successful `ensure`). */
  execute(code: string, opts: ExecuteOptions, ctx: LanguageSlotContext): Promise<ExecuteResult>;
  /** Shuts the slot's kernel down. */
  shutdown(reason?: string): Promise<void>;
  /** A summary of the slot's state for `KernelSession.status()`. */
  status(): unknown;
}
