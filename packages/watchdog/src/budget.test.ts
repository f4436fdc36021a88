import { ManualClock } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { CellBudget } from './budget.js';

describe('CellBudget', () => {
  it('expires once after its limit of running time, pauses excluded', async () => {
    const clock = new ManualClock();
    let expired = 0;
    const budget = new CellBudget(clock, 1_000, () => expired++);
    budget.start();
    await clock.advance(400);
    budget.pause();
    budget.pause(); // two overlapping stdin waits
    await clock.advance(10_000);
    budget.resume();
    await clock.advance(10_000);
    expect(expired).toBe(0);
    budget.resume();
    await clock.advance(599);
    expect(expired).toBe(0);
    await clock.advance(1);
    expect(expired).toBe(1);
    budget.pause();
    budget.resume();
    await clock.advance(10_000);
    expect(expired).toBe(1);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('never arms a timer without a limit, and dispose cancels a running one', () => {
    const clock = new ManualClock();
    new CellBudget(clock, undefined, () => {}).start();
    expect(clock.pendingTimers()).toBe(0);
    const budget = new CellBudget(clock, 5, () => {});
    budget.start();
    expect(clock.pendingTimers()).toBe(1);
    budget.dispose();
    budget.resume();
    expect(clock.pendingTimers()).toBe(0);
  });
});
