import { KernelwardenError } from '@kernelwarden/core';

/** What the watchdog knew about the cell when it gave up on it. */
export interface CellTimeoutDetails {
  /** The budget that ran out, in milliseconds. */
  timeoutMs: number;
  /** The supervisor slot the cell ran in (`'python'`, `'r'`, …). */
  slot: string;
  /** The cell id sent to the kernel. */
  cellId: string;
  /** Id of the lease the cell ran on. */
  leaseId: string;
  /** Generation of the lease the cell ran on. */
  generation: number;
  /** The error that stopped recovery (restart or bootstrap failure). */
  cause?: unknown;
}

/** Formats a budget as the seconds the messages print: `900s`, `2s`, `0.25s`. */
export function formatSeconds(ms: number): string {
  const seconds = ms / 1000;
  return `${Number.isInteger(seconds) ? seconds : Number(seconds.toFixed(3))}s`;
}

const RAISE_BUDGET = 'raise the cell timeout (policy cellTimeoutMs, or KERNELWARDEN_CELL_TIMEOUT in seconds)';

/**
 * A cell ran past its budget, ignored the interrupt, and the watchdog killed it and reset the kernel: the same
 * kernel was restarted (generation + 1) and re-bootstrapped, so variables from earlier cells are gone.
 * `name` is `'TimeoutError'`; the message begins `cell exceeded <N>s`.
 *
 * Catch it (or any variant, all recognised by `CellTimeoutError.isInstance`) to tell the user the kernel was reset.
 */
export class CellTimeoutError extends KernelwardenError {
  static override readonly brand: string = 'CellTimeoutError';
  /** The budget that ran out, in milliseconds. */
  readonly timeoutMs: number;
  /** The slot the cell ran in. */
  readonly slot: string;
  /** The cell id sent to the kernel. */
  readonly cellId: string;
  /** Id of the lease the cell ran on. */
  readonly leaseId: string;
  /** Generation of the lease the cell ran on. */
  readonly generation: number;

  constructor(details: CellTimeoutDetails, message?: string, code = 'CELL_TIMEOUT') {
    super(
      message ??
        `cell exceeded ${formatSeconds(details.timeoutMs)} with no result and was stopped; the kernel was reset ` +
          '(variables from earlier cells were cleared). Re-run the setup your next cells need, split the work into ' +
          `smaller steps, or ${RAISE_BUDGET}.`,
      { code, cause: details.cause, retryable: true, name: 'TimeoutError' },
    );
    this.timeoutMs = details.timeoutMs;
    this.slot = details.slot;
    this.cellId = details.cellId;
    this.leaseId = details.leaseId;
    this.generation = details.generation;
  }
}

/**
 * A cell ran past its budget and was killed, but restarting its kernel failed; the kernel was shut down and the slot
 * is empty, so the next cell starts a fresh kernel. `cause` holds the restart error.
 *
 * Catch it to tell the user that the kernel is gone rather than reset.
 */
export class CellTimeoutRestartFailedError extends CellTimeoutError {
  static override readonly brand: string = 'CellTimeoutRestartFailedError';

  constructor(details: CellTimeoutDetails) {
    super(
      details,
      `cell exceeded ${formatSeconds(details.timeoutMs)} with no result and was stopped, but the kernel could not be ` +
        'restarted and was shut down (variables from earlier cells are gone). The next cell starts a fresh kernel; ' +
        'if that fails too, check the kernel and its environment.',
      'CELL_TIMEOUT_RESTART_FAILED',
    );
  }
}

/**
 * A cell ran past its budget and its kernel was restarted, but the bootstrap of the restarted kernel failed; that
 * kernel was shut down and the slot is empty. `cause` holds the bootstrap error.
 *
 * Catch it to tell the user that the kernel is gone and the bootstrap needs attention.
 */
export class CellTimeoutBootstrapFailedError extends CellTimeoutError {
  static override readonly brand: string = 'CellTimeoutBootstrapFailedError';

  constructor(details: CellTimeoutDetails) {
    super(
      details,
      `cell exceeded ${formatSeconds(details.timeoutMs)} with no result and was stopped; the kernel was restarted ` +
        'but its bootstrap failed, so it was shut down (variables from earlier cells are gone). The next cell starts ' +
        'a fresh kernel; if the bootstrap fails again, fix it before retrying.',
      'CELL_TIMEOUT_BOOTSTRAP_FAILED',
    );
  }
}

/**
 * A cell ran past its budget and was still running after the kill grace; the watchdog abandoned its lease (shut it
 * down, slot empty), so the next cell starts a fresh kernel.
 *
 * Catch it to tell the user that the kernel is gone rather than reset.
 */
export class CellTimeoutAbandonedError extends CellTimeoutError {
  static override readonly brand: string = 'CellTimeoutAbandonedError';

  constructor(details: CellTimeoutDetails) {
    super(
      details,
      `cell exceeded ${formatSeconds(details.timeoutMs)} with no result and did not stop when its kernel was ` +
        'killed; the kernel was abandoned and shut down (variables from earlier cells are gone). The next cell ' +
        `starts a fresh kernel; split the work into smaller steps, or ${RAISE_BUDGET}.`,
      'CELL_TIMEOUT_ABANDONED',
    );
  }
}

/**
 * A cell ran past its budget, but its lease had already been replaced or emptied (a stop, an environment change)
 * while it ran; the watchdog touched nothing newer than that lease.
 *
 * Catch it to tell the user the cell gave no result; the session's current kernel is whatever replaced it.
 */
export class CellTimeoutLeaseReplacedError extends CellTimeoutError {
  static override readonly brand: string = 'CellTimeoutLeaseReplacedError';

  constructor(details: CellTimeoutDetails) {
    super(
      details,
      `cell exceeded ${formatSeconds(details.timeoutMs)} with no result; its kernel was replaced or stopped while ` +
        'it ran, so the watchdog left the current kernel untouched. Run the cell again if you still need it.',
      'CELL_TIMEOUT_LEASE_REPLACED',
    );
  }
}
