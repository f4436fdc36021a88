import type { Clock, Timer } from '@kernelwarden/core';

/**
 * The time one cell may still run: a single clock timer that can be paused while the kernel waits for the user's
 * stdin answer, and resumed afterwards with whatever was left.
 */
export class CellBudget {
  readonly #clock: Clock;
  readonly #onExpire: () => void;
  #remaining: number | undefined;
  #timer: Timer | undefined;
  #runningSince = 0;
  #pauses = 0;
  #done = false;

  /** `limitMs` undefined means no budget: `onExpire` never runs. */
  constructor(clock: Clock, limitMs: number | undefined, onExpire: () => void) {
    this.#clock = clock;
    this.#remaining = limitMs;
    this.#onExpire = onExpire;
  }

  /** Starts counting down. */
  start(): void {
    this.#arm();
  }

  /** Stops the countdown until every `pause()` has been matched by a `resume()`. */
  pause(): void {
    if (this.#done) return;
    this.#pauses += 1;
    if (this.#pauses > 1 || this.#timer === undefined || this.#remaining === undefined) return;
    this.#timer.cancel();
    this.#timer = undefined;
    this.#remaining = Math.max(0, this.#remaining - (this.#clock.now() - this.#runningSince));
  }

  /** Undoes one `pause()`; the countdown goes on from where it stopped. */
  resume(): void {
    if (this.#done || this.#pauses === 0) return;
    this.#pauses -= 1;
    if (this.#pauses === 0) this.#arm();
  }

  /** Cancels the timer for good. Idempotent. */
  dispose(): void {
    this.#done = true;
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  #arm(): void {
    if (this.#done || this.#remaining === undefined || this.#timer !== undefined) return;
    this.#runningSince = this.#clock.now();
    this.#timer = this.#clock.setTimer(() => {
      this.#timer = undefined;
      if (this.#done) return;
      this.#done = true;
      this.#onExpire();
    }, this.#remaining);
  }
}
