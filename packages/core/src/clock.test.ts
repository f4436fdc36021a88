import { describe, expect, it } from 'vitest';
import { isClock, sleep, systemClock } from './clock.js';

describe('systemClock', () => {
  it('runs a timer after its delay, on a monotonic scale', async () => {
    const start = systemClock.now();
    await new Promise<void>((resolve) => systemClock.setTimer(resolve, 20));
    expect(systemClock.now() - start).toBeGreaterThanOrEqual(15);
  });

  it('never runs a cancelled timer', async () => {
    let fired = false;
    const timer = systemClock.setTimer(() => {
      fired = true;
    }, 5);
    timer.cancel();
    timer.cancel();
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(fired).toBe(false);
  });
});

describe('sleep', () => {
  it('resolves after the delay of the given clock', async () => {
    const timers: { ms: number; run: () => void }[] = [];
    const clock = {
      now: () => 0,
      setTimer: (run: () => void, ms: number) => {
        timers.push({ ms, run });
        return { cancel: () => {} };
      },
    };
    let done = false;
    const slept = sleep(1000, { clock }).then(() => {
      done = true;
    });
    await Promise.resolve();
    expect(done).toBe(false);
    expect(timers.map((t) => t.ms)).toEqual([1000]);
    timers[0]!.run();
    await slept;
    expect(done).toBe(true);
  });

  it('rejects with the signal reason and cancels its timer', async () => {
    let cancelled = 0;
    const clock = { now: () => 0, setTimer: () => ({ cancel: () => void cancelled++ }) };
    const controller = new AbortController();
    const slept = sleep(1000, { clock, signal: controller.signal });
    const reason = new Error('stop');
    controller.abort(reason);
    await expect(slept).rejects.toBe(reason);
    expect(cancelled).toBe(1);
    await expect(sleep(5, { signal: controller.signal })).rejects.toBe(reason);
  });
});

describe('isClock', () => {
  it('accepts an object with now() and setTimer(), and nothing less', () => {
    expect(isClock(systemClock)).toBe(true);
    expect(isClock({ now: () => 0, setTimer: () => ({ cancel() {} }) })).toBe(true);
    expect(isClock({ setTimer: () => ({ cancel() {} }) })).toBe(false);
    expect(isClock({ now: () => 0 })).toBe(false);
    expect(isClock(null)).toBe(false);
    expect(isClock(() => 0)).toBe(false);
  });
});
