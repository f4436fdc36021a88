import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { Gate } from './gate.js';

describe('Gate', () => {
  it('holds waiters until opened, then lets every waiter through', async () => {
    const gate = new Gate();
    const order: string[] = [];
    const a = gate.wait().then(() => order.push('a'));
    const b = gate.wait().then(() => order.push('b'));
    await Promise.resolve();
    expect(order).toEqual([]);
    expect(gate.waiting).toBe(2);
    gate.open();
    await Promise.all([a, b]);
    expect(order).toEqual(['a', 'b']);
    expect(gate.isOpen).toBe(true);
  });

  it('resolves at once while open, and holds again after reset', async () => {
    const gate = new Gate(true);
    await gate.wait();
    gate.reset();
    expect(gate.isOpen).toBe(false);
    let passed = false;
    const waiting = gate.wait().then(() => {
      passed = true;
    });
    await Promise.resolve();
    expect(passed).toBe(false);
    gate.open();
    await waiting;
    expect(passed).toBe(true);
  });

  it('rejects a wait with the signal reason when it aborts, and forgets the waiter', async () => {
    const gate = new Gate();
    const controller = new AbortController();
    const waiting = gate.wait(controller.signal);
    const reason = new Error('stop waiting');
    controller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    expect(gate.waiting).toBe(0);
    await expect(gate.wait(controller.signal)).rejects.toBe(reason);
  });
});

describe('Gate listeners', () => {
  it('leaves no abort listener behind after 10,000 waits on one signal', async () => {
    const controller = new AbortController();
    for (let i = 0; i < 10_000; i++) {
      const gate = new Gate();
      const waiting = gate.wait(controller.signal);
      gate.open();
      await waiting;
    }
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });
});
