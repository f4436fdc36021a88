import { abortScope, sleep } from '@kernelwarden/core';
import { describe, expect, it } from 'vitest';
import { ManualClock } from './manual-clock.js';

describe('ManualClock', () => {
  it('starts at the given time and moves only on advance', async () => {
    const clock = new ManualClock(100);
    expect(clock.now()).toBe(100);
    await clock.advance(50);
    expect(clock.now()).toBe(150);
  });

  it('fires due timers in time order, then by scheduling order, and leaves later ones pending', async () => {
    const clock = new ManualClock();
    const fired: string[] = [];
    clock.setTimer(() => fired.push('c@30'), 30);
    clock.setTimer(() => fired.push('a@10'), 10);
    clock.setTimer(() => fired.push('b@10'), 10);
    clock.setTimer(() => fired.push('late@100'), 100);
    await clock.advance(30);
    expect(fired).toEqual(['a@10', 'b@10', 'c@30']);
    expect(clock.pendingTimers()).toBe(1);
  });

  it('runs each timer at its own time, so now() inside a callback is the due time', async () => {
    const clock = new ManualClock();
    const seen: number[] = [];
    clock.setTimer(() => seen.push(clock.now()), 5);
    clock.setTimer(() => seen.push(clock.now()), 12);
    await clock.advance(20);
    expect(seen).toEqual([5, 12]);
    expect(clock.now()).toBe(20);
  });

  it('lets awaited code between timers run, as in real time (sleep chains fire within one advance)', async () => {
    const clock = new ManualClock();
    const steps: number[] = [];
    const chain = (async () => {
      await sleep(10, { clock });
      steps.push(clock.now());
      await Promise.resolve();
      await sleep(10, { clock });
      steps.push(clock.now());
    })();
    await clock.advance(25);
    await chain;
    expect(steps).toEqual([10, 20]);
  });

  it('does not fire a cancelled timer', async () => {
    const clock = new ManualClock();
    let fired = false;
    const timer = clock.setTimer(() => {
      fired = true;
    }, 10);
    timer.cancel();
    timer.cancel();
    await clock.advance(20);
    expect(fired).toBe(false);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('drives core deadlines: an abortScope times out exactly at its deadline', async () => {
    const clock = new ManualClock();
    const scope = abortScope({ timeoutMs: 100, clock });
    await clock.advance(99);
    expect(scope.signal.aborted).toBe(false);
    await clock.advance(1);
    expect(scope.timedOut).toBe(true);
    scope.dispose();
  });

  it('runAll fires everything, timers scheduled by timers included', async () => {
    const clock = new ManualClock();
    const fired: number[] = [];
    clock.setTimer(() => {
      fired.push(clock.now());
      clock.setTimer(() => fired.push(clock.now()), 40);
    }, 10);
    await clock.runAll();
    expect(fired).toEqual([10, 50]);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('runAll stops a timer that re-arms forever with an error', async () => {
    const clock = new ManualClock();
    const rearm = () => void clock.setTimer(rearm, 1);
    rearm();
    await expect(clock.runAll(50)).rejects.toThrow(/more keep coming/);
  });

  it('rejects a negative advance', async () => {
    await expect(new ManualClock().advance(-1)).rejects.toThrow(RangeError);
  });
});
