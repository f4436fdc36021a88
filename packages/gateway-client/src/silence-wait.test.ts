import { ManualClock } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { afterSilence } from './silence-wait.js';

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function setup(graceMs = 100) {
  const clock = new ManualClock();
  const source = { count: 0, open: true };
  const state = { waiting: true, silent: 0 };
  const wait = afterSilence({
    clock,
    graceMs,
    source: { received: () => source.count, listening: () => source.open },
    stillWaiting: () => state.waiting,
    onSilent: () => state.silent++,
  });
  return { clock, source, state, wait };
}

describe('afterSilence', () => {
  it('fires once the socket received nothing for graceMs, confirmed after the next poll phase', async () => {
    const { clock, state } = setup();
    await clock.advance(99);
    expect(state.silent).toBe(0);
    await clock.advance(1);
    await nextTurn();
    expect(state.silent).toBe(1);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('starts again while messages arrive, and while the socket is not listening', async () => {
    const { clock, source, state } = setup();
    await clock.advance(50);
    source.count++;
    await clock.advance(50);
    await nextTurn();
    expect(state.silent).toBe(0);
    source.open = false;
    await clock.advance(100);
    await nextTurn();
    expect(state.silent).toBe(0);
    source.open = true;
    await clock.advance(100);
    await nextTurn();
    expect(state.silent).toBe(1);
  });

  it('does not fire when a message is read between the timer and the poll phase', async () => {
    const clock = new ManualClock();
    let count = 0;
    let silent = 0;
    afterSilence({
      clock,
      graceMs: 100,
      // The first check finds the socket silent; a message is read right after it, before the confirmation.
      source: {
        received: () => count,
        listening: () => {
          count++;
          return true;
        },
      },
      stillWaiting: () => true,
      onSilent: () => silent++,
    });
    await clock.advance(100);
    expect(silent).toBe(0);
    expect(clock.pendingTimers()).toBe(1);
  });

  it('gives up when no longer waiting, and on cancel()', async () => {
    const { clock, state, wait } = setup();
    state.waiting = false;
    await clock.advance(100);
    await nextTurn();
    expect(state.silent).toBe(0);
    const second = setup();
    second.wait.cancel();
    expect(second.clock.pendingTimers()).toBe(0);
    wait.cancel();
  });
});
