import { onAbort } from './abort-relay.js';
/** A scheduled callback that can be cancelled. */
export interface Timer {
  /** Cancels the callback if it has not run yet; calling it again does nothing. */
  cancel(): void;
}

/**
 * The source of time and timers for every kernelwarden component.
 *
 * Inject one (testkit's `ManualClock`) to drive time in tests instead of sleeping.
 */
export interface Clock {
  /** Milliseconds on a monotonic scale; only differences are meaningful. */
  now(): number;
  /** Runs `callback` once after `ms` milliseconds. */
  setTimer(callback: () => void, ms: number): Timer;
}

/**
 * True for an object with `now()` and `setTimer()`: what every package accepts as an injected clock.
 *
 * Use it wherever options take a `clock`, so each validates it the same way.
 */
export function isClock(value: unknown): value is Clock {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Clock).now === 'function' &&
    typeof (value as Clock).setTimer === 'function'
  );
}

/**
 * The real clock: `performance.now()` and Node's timers.
 *
 * The default everywhere a clock can be injected.
 */
export const systemClock: Clock = {
  now: () => performance.now(),
  setTimer(callback, ms) {
    const handle = setTimeout(callback, Math.max(0, ms));
    return { cancel: () => clearTimeout(handle) };
  },
};

/**
 * Resolves after `ms` milliseconds of `clock` time; rejects with the signal's reason if it aborts first.
 *
 * Use it for waits that tests should drive with a manual clock.
 */
export function sleep(ms: number, opts: { clock?: Clock; signal?: AbortSignal } = {}): Promise<void> {
  const { clock = systemClock, signal } = opts;
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise<void>((resolve, reject) => {
    const timer = clock.setTimer(() => {
      unlisten?.();
      resolve();
    }, ms);
    const unlisten = signal
      ? onAbort(signal, () => {
          timer.cancel();
          reject(signal.reason);
        })
      : undefined;
  });
}
