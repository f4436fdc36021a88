import { describe, expect, it } from 'vitest';
import { SendGate } from './send-gate.js';

const deferred = () => {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
};
const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('SendGate', () => {
  it('sends at once when nothing is held', () => {
    const gate = new SendGate();
    const sent: string[] = [];
    gate.whenOpen(() => sent.push('now'));
    expect(sent).toEqual(['now']);
    expect(gate.held).toBe(false);
  });

  it('holds requests until every hold ended, in order, a rejected one counting as ended', async () => {
    const gate = new SendGate();
    const first = deferred();
    const second = deferred();
    const order: string[] = [];
    gate.hold(first.promise, () => order.push('release first'));
    gate.hold(second.promise, () => order.push('release second'));
    gate.whenOpen(() => order.push('sent'));
    expect(gate.held).toBe(true);
    second.resolve();
    await flush();
    expect(order).toEqual([]);
    first.reject(new Error('restart failed'));
    await flush();
    expect(order).toEqual(['release first', 'release second', 'sent']);
    expect(gate.held).toBe(false);
  });
});
