import { type ExecuteResult, InvalidOptionsError, KernelwardenError } from '@kernelwarden/core';

/**
 * A kernel factory threw, or returned a kernel that was already dead. The slot's current kernel and generation are
 * unchanged. The factory's own error is the `cause`.
 *
 * Retryable when the cause says so (a gateway that was briefly unavailable).
 */
export class KernelFactoryError extends KernelwardenError {
  static override readonly brand: string = 'KernelFactoryError';
  /** The slot the kernel was built for. */
  readonly slot: string;
  /** The key the kernel was built for. */
  readonly key: string;
  constructor(slot: string, key: string, reason: string, cause?: unknown) {
    const retryable = KernelwardenError.isInstance(cause) ? cause.retryable : false;
    super(`Failed to build the "${slot}" kernel (key "${key}"): ${reason}`, {
      code: 'KERNEL_FACTORY',
      cause,
      retryable,
    });
    this.slot = slot;
    this.key = key;
  }
}

/**
 * A kernel build was cancelled before it was published: the slot was stopped, the supervisor shut down, or a newer
 * `ensure` with another key superseded it. The built kernel (if any) is shut down.
 *
 * Retryable: ensuring again builds a fresh kernel.
 */
export class BuildCancelledError extends KernelwardenError {
  static override readonly brand: string = 'BuildCancelledError';
  constructor(slot: string, why: string) {
    super(`The "${slot}" kernel build was cancelled: ${why}`, { code: 'BUILD_CANCELLED', retryable: true });
  }
}

/**
 * `restartIfCurrent` could not restart the kernel (it threw, had no `restart()`, or was dead afterwards). The slot
 * is emptied with `endedReason: 'restart_failed'`, so the next `ensure` builds a fresh kernel.
 */
export class KernelRestartError extends KernelwardenError {
  static override readonly brand: string = 'KernelRestartError';
  constructor(slot: string, reason: string, cause?: unknown) {
    super(`Failed to restart the "${slot}" kernel: ${reason}`, { code: 'KERNEL_RESTART', cause, retryable: true });
  }
}

/**
 * The session's `bootstrap` failed on a new kernel, which was shut down. For a kernel started where none was running,
 * the slot ends with `endedReason: 'bootstrap_failed'` and the next execution builds a fresh kernel; for an
 * environment switch's replacement the old kernel, its environment and generation stay in place.
 */
export class BootstrapError extends KernelwardenError {
  static override readonly brand: string = 'BootstrapError';
  constructor(slot: string, cause: unknown) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    super(`Kernel bootstrap failed on the "${slot}" slot: ${reason}`, {
      code: 'BOOTSTRAP_FAILED',
      cause,
      retryable: true,
    });
  }
}

/** The supervisor or session was closed (`shutdownAll()` / `close()`); it starts no more kernels. */
export class ClosedError extends KernelwardenError {
  static override readonly brand: string = 'ClosedError';
  constructor(what: 'supervisor' | 'session' | 'spares') {
    super(`The kernel ${what} is closed; create a new one to run more code`, { code: 'CLOSED' });
  }
}

/**
 * A lifecycle request (`start()`, `setEnv()`, `restart()`) was issued before a `stop()` that cancelled it: the last
 * intent wins and the request is dropped without acting. Issue it again to act after the stop.
 */
export class SessionStoppedError extends KernelwardenError {
  static override readonly brand: string = 'SessionStoppedError';
  constructor(what: string) {
    super(`${what} was cancelled by a stop() issued after it; issue it again`, { code: 'SESSION_STOPPED' });
  }
}

/** An executor found no kernel to run on: the slot has no lease and the request carried none. */
export class NoKernelError extends KernelwardenError {
  static override readonly brand: string = 'NoKernelError';
  constructor(slot: string, why = 'has no running kernel') {
    super(`The "${slot}" slot ${why}`, { code: 'NO_KERNEL', retryable: true });
  }
}

/** A background cell could not be started or looked up (unknown id, or too many running). */
export class BackgroundCellError extends KernelwardenError {
  static override readonly brand: string = 'BackgroundCellError';
  constructor(message: string, code: 'BACKGROUND_NOT_FOUND' | 'BACKGROUND_LIMIT') {
    super(message, { code, retryable: code === 'BACKGROUND_LIMIT' });
  }
}

/**
 * Where a `KernelUnavailableError` rides on the `error` of the result it explains: a non-enumerable property, so
 * JSON and equality checks never see it, under a `Symbol.for` key, so duplicate installs find it.
 */
export const UNAVAILABLE_KEY: unique symbol = Symbol.for('kernelwarden.kernelUnavailable');

/**
 * A language slot could not provide a kernel (R is not installed, its kernelspec is missing, its bootstrap failed).
 * It is never thrown by `execute`: a `KernelSession` answers the cell with an `error` result (`ename` is the slot's
 * `unavailableName`, e.g. `'RKernelUnavailable'`, `evalue` the slot's message) and leaves every other slot alone;
 * this error rides on that result.
 *
 * Recognise such a result with `KernelUnavailableError.fromResult(result)` rather than by comparing `ename`.
 */
export class KernelUnavailableError extends KernelwardenError {
  static override readonly brand: string = 'KernelUnavailableError';
  /** The language whose kernel is unavailable (`'r'`). */
  readonly language: string;
  /** The `ename` of the error result (`'RKernelUnavailable'`). */
  readonly ename: string;

  constructor(language: string, ename: string, message: string) {
    super(message, { code: 'KERNEL_UNAVAILABLE', retryable: true });
    this.language = language;
    this.ename = ename;
  }

  /**
   * The `KernelUnavailableError` behind an error result, or `undefined` when the result is not a language slot's
   * soft failure. Works on the result as `execute` returned it (and on copies that keep its `error` object), also
   * across duplicate installs.
   */
  static fromResult(result: Pick<ExecuteResult, 'error'> | undefined): KernelUnavailableError | undefined {
    const error = result?.error as Record<symbol, unknown> | undefined;
    const cause = error?.[UNAVAILABLE_KEY];
    return KernelUnavailableError.isInstance(cause) ? cause : undefined;
  }
}

/**
 * `execute` was asked for a language the session has no slot for. An `InvalidOptionsError` at path `language` (so
 * code that catches those keeps working) that also names the language and the ones the session has.
 */
export class UnknownLanguageError extends InvalidOptionsError {
  static override readonly brand: string = 'UnknownLanguageError';
  /** The language asked for. */
  readonly language: string;
  /** The languages the session runs (`['python', 'r']`). */
  readonly available: readonly string[];

  constructor(language: string, available: readonly string[]) {
    super([
      {
        path: 'language',
        message: `this session has no "${language}" slot (it has ${available.map((a) => `"${a}"`).join(', ')})`,
      },
    ]);
    this.language = language;
    this.available = available;
  }
}

/** The message of an unknown thrown value. */
export function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
