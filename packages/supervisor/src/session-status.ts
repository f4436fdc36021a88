import type { ExecuteOptions } from '@kernelwarden/core';
import type { LanguageSlotStatus } from './language-slot.js';
import type { SlotStatus } from './lease.js';

/**
 * The languages a session runs: `'python'`, `'r'` (its slot is optional: a session without one answers an R cell
 * with `UnknownLanguageError`), and the names `L` of the slots given in `slots`.
 */
export type SessionLanguage<L extends string = never> = 'python' | 'r' | L;

/** Options of `KernelSession.execute()`; `L` as in `SessionLanguage`. */
export interface SessionExecuteOptions<L extends string = never>
  extends Pick<ExecuteOptions, 'cellId' | 'origin' | 'onOutput' | 'onInput'> {
  /** Which slot runs the cell. @defaultValue 'python' */
  language?: SessionLanguage<L>;
  /** Cancels the cell (or its wait for the turn): it settles with `cancelled: true`. */
  signal?: AbortSignal;
}

/** The statuses of a `kernel_status` event. */
export type KernelStatus = 'started' | 'stopped' | 'restarted' | 'env_changed' | 'ended';

/** Events of a `KernelSession`. */
export interface KernelStatusEvent {
  type: 'kernel_status';
  status: KernelStatus;
  /** The slot concerned (`'python'`, or a language slot's name for its idle expiry). */
  slot: string;
  /** The slot's generation after the change. */
  generation: number;
  /** The current lease's id, when there is one. */
  leaseId?: string;
  /** The active Python environment after the change. */
  env?: string;
  /** Why the kernel ended, for `stopped` and `ended`. */
  endedReason?: string;
}

/** `KernelSession.status()`: the Python slot's status plus the session's own state and its language slots'. */
export interface SessionStatus<L extends string = never> extends SlotStatus {
  /** The environment the current (or next) Python kernel runs in. */
  env: string | undefined;
  /** The environment asked for last; differs from `env` after a failed `setEnv`. */
  desiredEnv: string | undefined;
  /** True while a stop is in progress or after it, until the next `start()` or `execute()`. */
  cancelled: boolean;
  /** A stop is in progress. */
  stopping: boolean;
  /** An execution or lifecycle step holds the turn barrier. */
  turnRunning: boolean;
  /** `close()` was called. */
  closed: boolean;
  /** Background cells still running. */
  backgroundRunning: number;
  /** Each language slot's own status, by name (none for a slot the session does not have). */
  slots: { readonly [N in Exclude<SessionLanguage<L>, 'python'>]?: LanguageSlotStatus };
}
