import { describe, expect, it } from 'vitest';
import { abortCallbacks, onAbort } from './abort-relay.js';
import { abortScope, raceSignal } from './deadline.js';

describe('onAbort', () => {
  it('puts one listener on a signal however many callbacks wait on it, and calls each once, in order', () => {
    const controller = new AbortController();
    let added = 0;
    const add = controller.signal.addEventListener.bind(controller.signal);
    controller.signal.addEventListener = ((...args: Parameters<typeof add>) => {
      added++;
      return add(...args);
    }) as typeof add;
    const calls: number[] = [];
    const cancels = Array.from({ length: 200 }, (_, i) => onAbort(controller.signal, () => calls.push(i)));
    expect(added).toBe(1);
    expect(abortCallbacks(controller.signal)).toBe(200);
    cancels[5]?.();
    cancels[5]?.();
    expect(abortCallbacks(controller.signal)).toBe(199);
    controller.abort();
    expect(calls).toEqual(Array.from({ length: 200 }, (_, i) => i).filter((i) => i !== 5));
    expect(abortCallbacks(controller.signal)).toBe(0);
  });

  it('abortScope and raceSignal on one shared signal leave nothing on it once disposed or settled', async () => {
    const shared = new AbortController();
    const scopes = Array.from({ length: 50 }, () => abortScope({ signal: shared.signal, timeoutMs: 60_000 }));
    await Promise.all(Array.from({ length: 50 }, (_, i) => raceSignal(Promise.resolve(i), shared.signal)));
    expect(abortCallbacks(shared.signal)).toBe(50);
    for (const scope of scopes) scope.dispose();
    expect(abortCallbacks(shared.signal)).toBe(0);
    const live = abortScope({ signal: shared.signal });
    shared.abort(new Error('stop'));
    expect(live.signal.aborted).toBe(true);
    expect(live.signal.reason).toMatchObject({ message: 'stop' });
  });
});
