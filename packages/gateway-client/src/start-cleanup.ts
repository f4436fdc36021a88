import { type Clock, DeadlineExceededError, type Timer } from '@kernelwarden/core';

/** How the DELETE of a kernel whose start failed is retried until the gateway confirms it. */
export interface CleanupRetryPolicy {
  /** DELETEs sent in all, the first included. */
  attempts: number;
  /** Wait before the second DELETE; it doubles before each further one. */
  initialDelayMs: number;
  /** The longest wait between two DELETEs. */
  maxDelayMs: number;
}

/** A cleanup in progress: the first attempt's outcome, and the outcome once every retry is done. */
export interface Cleanup {
  /** True when the first DELETE was confirmed. */
  first: Promise<boolean>;
  /** True when some DELETE was confirmed; false when every attempt failed. Never rejects. */
  done: Promise<boolean>;
}

/**
 * Deletes a kernel left behind by a failed start until the gateway confirms it: the first DELETE now, then after
 * backoff delays on `clock`, each one bounded by `timeoutMs` (`0`: by nothing but the gateway's answer). Runs in the
 * background, so an aborted start can reject at once; a process that exits before it is confirmed leaves the
 * kernel to `LocalGateway`'s orphan sweep (its ownership record is removed only on a confirmed DELETE).
 *
 * `attemptDelete` sends one DELETE with the given signal and resolves with whether it was confirmed.
 */
export function deleteUntilConfirmed(
  attemptDelete: (signal: AbortSignal) => Promise<boolean>,
  opts: { clock: Clock; timeoutMs: number; retry: CleanupRetryPolicy },
): Cleanup {
  const { clock, timeoutMs, retry } = opts;
  const once = async (): Promise<boolean> => {
    const controller = new AbortController();
    let bound: Timer | undefined;
    if (timeoutMs > 0) {
      bound = clock.setTimer(
        () =>
          controller.abort(
            new DeadlineExceededError(`The cleanup DELETE took longer than ${timeoutMs} ms`, { timeoutMs }),
          ),
        timeoutMs,
      );
    }
    try {
      return await attemptDelete(controller.signal);
    } catch {
      return false;
    } finally {
      bound?.cancel();
    }
  };
  const first = once();
  const done = (async () => {
    if (await first) return true;
    for (let attempt = 2; attempt <= retry.attempts; attempt++) {
      const delay = Math.min(retry.maxDelayMs, retry.initialDelayMs * 2 ** (attempt - 2));
      await new Promise<void>((resolve) => clock.setTimer(resolve, delay));
      if (await once()) return true;
    }
    return false;
  })();
  return { first, done };
}
