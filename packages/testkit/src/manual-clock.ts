import type { Clock, Timer } from '@kernelwarden/core';

/** Options of `new ManualClock()` beyond the start time. */
export interface ManualClockOptions {
  /**
   * How many `setImmediate` rounds `advance()` waits between two timers (and after the last one), so promise
   * chains started by a timer callback settle before the next timer fires.
   * @defaultValue 10
   */
  flushRounds?: number;
}

interface ScheduledTimer {
  readonly due: number;
  readonly seq: number;
  readonly callback: () => void;
}

/**
 * A `Clock` whose time moves only when the test says so: `advance(ms)` fires the timers that fall due, in time
 * order, and lets pending promise callbacks run between them.
 *
 * Use it wherever a component takes a `clock` option, to test timeouts and graces without sleeping.
 */
export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  readonly #timers = new Set<ScheduledTimer>();
  readonly #flushRounds: number;

  /** @param startMs the value `now()` returns before the first `advance()`. @defaultValue 0 */
  constructor(startMs = 0, opts: ManualClockOptions = {}) {
    this.#now = startMs;
    this.#flushRounds = Math.max(1, opts.flushRounds ?? 10);
  }

  /** The current manual time in milliseconds. */
  now(): number {
    return this.#now;
  }

  /** Schedules `callback` at `now() + ms` (a negative or `NaN` delay counts as 0). */
  setTimer(callback: () => void, ms: number): Timer {
    const delay = Number.isFinite(ms) ? Math.max(0, ms) : ms === Number.POSITIVE_INFINITY ? ms : 0;
    const timer: ScheduledTimer = { due: this.#now + delay, seq: this.#seq++, callback };
    this.#timers.add(timer);
    return { cancel: () => void this.#timers.delete(timer) };
  }

  /** How many timers are scheduled and not yet fired or cancelled. Assert `0` to prove nothing leaked. */
  pendingTimers(): number {
    return this.#timers.size;
  }

  /**
   * Moves time forward by `ms`, firing every timer that falls due on the way in time order (timers scheduled by
   * those callbacks included), and waits for pending promise callbacks between timers and at the end.
   */
  async advance(ms: number): Promise<void> {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`ManualClock.advance() needs a finite ms >= 0, got ${ms}`);
    const target = this.#now + ms;
    await this.#flush();
    for (let next = this.#next(target); next; next = this.#next(target)) {
      this.#timers.delete(next);
      this.#now = Math.max(this.#now, next.due);
      next.callback();
      await this.#flush();
    }
    this.#now = target;
    await this.#flush();
  }

  /**
   * Fires every pending timer in time order, moving time to each one, until none is left; throws after `limit`
   * timers, which catches code that re-arms a timer forever.
   */
  async runAll(limit = 10_000): Promise<void> {
    await this.#flush();
    for (let fired = 0; ; fired++) {
      const next = this.#next(Number.POSITIVE_INFINITY);
      if (!next || next.due === Number.POSITIVE_INFINITY) return;
      if (fired >= limit) throw new Error(`ManualClock.runAll() fired ${limit} timers and more keep coming`);
      await this.advance(next.due - this.#now);
    }
  }

  #next(until: number): ScheduledTimer | undefined {
    let best: ScheduledTimer | undefined;
    for (const t of this.#timers) {
      if (t.due > until) continue;
      if (!best || t.due < best.due || (t.due === best.due && t.seq < best.seq)) best = t;
    }
    return best;
  }

  async #flush(): Promise<void> {
    for (let i = 0; i < this.#flushRounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
  }
}
