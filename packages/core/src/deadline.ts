import { onAbort } from './abort-relay.js';
import { type Clock, systemClock, type Timer } from './clock.js';
import { DeadlineExceededError } from './errors.js';

/** Options of `abortScope()` and `withDeadline()`. */
export interface DeadlineOptions {
  /** The caller's signal; its abort propagates with its own `reason`. */
  signal?: AbortSignal;
  /** Milliseconds until the scope aborts with a `TimeoutError`; `0`, negative, infinite or absent disables it. */
  timeoutMs?: number;
  /** The clock that measures the deadline. @defaultValue systemClock */
  clock?: Clock;
  /** Message of the `TimeoutError` raised when the deadline runs out. @defaultValue `Operation timed out after <N> ms` */
  timeoutMessage?: string;
}

/**
 * A caller's signal combined with a deadline, with exactly one listener on the caller's signal that `dispose()`
 * removes — unlike `AbortSignal.any`, it never piles listeners on a long-lived signal.
 *
 * Create one per operation with `abortScope()`, pass `scope.signal` down, and dispose it when the operation settles.
 */
export interface AbortScope extends Disposable {
  /** Aborts with the caller's reason, or with a `DeadlineExceededError` when the deadline runs out. */
  readonly signal: AbortSignal;
  /** True once the deadline (not the caller) aborted the scope. */
  readonly timedOut: boolean;
  /** Milliseconds left before the deadline; `Infinity` without one, `0` once aborted. */
  remaining(): number;
  /** Throws the abort reason if the scope is aborted. */
  throwIfAborted(): void;
  /** Settles like `promise`, or rejects with the abort reason as soon as the scope aborts. */
  race<T>(promise: Promise<T>): Promise<T>;
  /** Removes the listener from the caller's signal and cancels the timer. Idempotent. */
  dispose(): void;
}

/**
 * Turns a user-facing timeout into a usable one: `0`, negative, `NaN`, infinite or absent mean "no deadline".
 *
 * Use it wherever an option documents `0` as "disabled".
 */
export function effectiveTimeout(ms: number | undefined): number | undefined {
  if (ms === undefined || !Number.isFinite(ms) || ms <= 0) return undefined;
  return ms;
}

/**
 * Creates an `AbortScope` from a caller's signal and a deadline.
 *
 * Use it for any operation with several steps that share one deadline and one cancellation.
 */
export function abortScope(opts: DeadlineOptions = {}): AbortScope {
  const { signal: outer, clock = systemClock } = opts;
  const timeoutMs = effectiveTimeout(opts.timeoutMs);
  const controller = new AbortController();
  const started = clock.now();
  let timer: Timer | undefined;
  let timedOut = false;
  let disposed = false;

  let unlisten: (() => void) | undefined;
  const onOuterAbort = () => {
    timer?.cancel();
    controller.abort(outer?.reason);
  };
  const dispose = () => {
    if (disposed) return;
    disposed = true;
    timer?.cancel();
    unlisten?.();
  };

  if (outer?.aborted) {
    controller.abort(outer.reason);
  } else {
    if (outer) unlisten = onAbort(outer, onOuterAbort);
    if (timeoutMs !== undefined) {
      timer = clock.setTimer(() => {
        if (controller.signal.aborted) return;
        timedOut = true;
        unlisten?.();
        controller.abort(
          new DeadlineExceededError(opts.timeoutMessage ?? `Operation timed out after ${timeoutMs} ms`, { timeoutMs }),
        );
      }, timeoutMs);
    }
  }

  const signal = controller.signal;
  return {
    signal,
    get timedOut() {
      return timedOut;
    },
    remaining() {
      if (signal.aborted) return 0;
      if (timeoutMs === undefined) return Number.POSITIVE_INFINITY;
      return Math.max(0, timeoutMs - (clock.now() - started));
    },
    throwIfAborted() {
      if (signal.aborted) throw signal.reason;
    },
    race<T>(promise: Promise<T>) {
      return raceSignal(promise, signal);
    },
    dispose,
    [Symbol.dispose]: dispose,
  };
}

/**
 * Settles like `promise`, or rejects with `signal.reason` as soon as `signal` aborts; the listener is removed either way.
 *
 * Use it to stop waiting for work that cannot itself be cancelled. The work goes on; only the wait ends.
 */
export function raceSignal<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) {
    promise.catch(() => {});
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const unlisten = onAbort(signal, () => reject(signal.reason));
    promise.then(
      (value) => {
        unlisten();
        resolve(value);
      },
      (error: unknown) => {
        unlisten();
        reject(error);
      },
    );
  });
}

/**
 * Runs `fn` with a signal that aborts on the caller's abort or on the deadline, and rejects at once when either
 * happens — with the caller's reason, or a `TimeoutError`.
 *
 * Use it to bound a single operation; use `abortScope()` directly when the steps need `remaining()`.
 */
export async function withDeadline<T>(fn: (signal: AbortSignal) => Promise<T>, opts: DeadlineOptions = {}): Promise<T> {
  const scope = abortScope(opts);
  try {
    scope.throwIfAborted();
    return await scope.race(fn(scope.signal));
  } finally {
    scope.dispose();
  }
}
