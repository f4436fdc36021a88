import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { Clock } from './clock.js';
import { abortScope, effectiveTimeout, raceSignal, withDeadline } from './deadline.js';
import { DeadlineExceededError, KernelwardenError } from './errors.js';

function manualClock() {
  let now = 0;
  let seq = 0;
  const timers = new Map<number, { at: number; run: () => void }>();
  const clock: Clock & { advance(ms: number): void; pending(): number } = {
    now: () => now,
    setTimer(run, ms) {
      const id = seq++;
      timers.set(id, { at: now + ms, run });
      return { cancel: () => timers.delete(id) };
    },
    advance(ms) {
      now += ms;
      for (const [id, t] of [...timers].sort((a, b) => a[1].at - b[1].at)) {
        if (t.at <= now) {
          timers.delete(id);
          t.run();
        }
      }
    },
    pending: () => timers.size,
  };
  return clock;
}

describe('effectiveTimeout', () => {
  it('treats 0, negative, NaN and infinite as no deadline', () => {
    expect(effectiveTimeout(0)).toBeUndefined();
    expect(effectiveTimeout(-5)).toBeUndefined();
    expect(effectiveTimeout(Number.NaN)).toBeUndefined();
    expect(effectiveTimeout(Number.POSITIVE_INFINITY)).toBeUndefined();
    expect(effectiveTimeout(undefined)).toBeUndefined();
    expect(effectiveTimeout(250)).toBe(250);
  });
});

describe('abortScope', () => {
  it('aborts with a TimeoutError when the deadline runs out', () => {
    const clock = manualClock();
    const scope = abortScope({ timeoutMs: 100, clock, timeoutMessage: 'step took too long' });
    expect(scope.remaining()).toBe(100);
    clock.advance(40);
    expect(scope.remaining()).toBe(60);
    expect(scope.signal.aborted).toBe(false);
    clock.advance(60);
    expect(scope.signal.aborted).toBe(true);
    expect(scope.timedOut).toBe(true);
    expect(scope.remaining()).toBe(0);
    const reason = scope.signal.reason;
    expect(reason.name).toBe('TimeoutError');
    expect(reason.message).toBe('step took too long');
    expect(DeadlineExceededError.isInstance(reason)).toBe(true);
    expect(() => scope.throwIfAborted()).toThrow('step took too long');
  });

  it("aborts with the caller's own reason and cancels the deadline", () => {
    const clock = manualClock();
    const caller = new AbortController();
    const scope = abortScope({ signal: caller.signal, timeoutMs: 100, clock });
    const reason = new Error('user pressed stop');
    caller.abort(reason);
    expect(scope.signal.reason).toBe(reason);
    expect(scope.timedOut).toBe(false);
    expect(clock.pending()).toBe(0);
  });

  it('starts aborted when the caller already aborted', () => {
    const caller = new AbortController();
    caller.abort('already');
    const scope = abortScope({ signal: caller.signal, timeoutMs: 10 });
    expect(scope.signal.aborted).toBe(true);
    expect(scope.signal.reason).toBe('already');
    expect(getEventListeners(caller.signal, 'abort')).toHaveLength(0);
  });

  it('has no deadline when timeoutMs is 0', () => {
    const clock = manualClock();
    const scope = abortScope({ timeoutMs: 0, clock });
    expect(scope.remaining()).toBe(Number.POSITIVE_INFINITY);
    expect(clock.pending()).toBe(0);
    scope.dispose();
  });

  it('is a Disposable that removes its listener and timer', () => {
    const clock = manualClock();
    const caller = new AbortController();
    {
      using scope = abortScope({ signal: caller.signal, timeoutMs: 50, clock });
      expect(getEventListeners(caller.signal, 'abort')).toHaveLength(1);
      expect(scope.signal.aborted).toBe(false);
    }
    expect(getEventListeners(caller.signal, 'abort')).toHaveLength(0);
    expect(clock.pending()).toBe(0);
  });
});

describe('raceSignal', () => {
  it('rejects with the reason as soon as the signal aborts, though the work never settles', async () => {
    const controller = new AbortController();
    const raced = raceSignal(new Promise(() => {}), controller.signal);
    controller.abort(new Error('cancel'));
    await expect(raced).rejects.toThrow('cancel');
  });

  it('passes results and errors through and removes its listener', async () => {
    const controller = new AbortController();
    await expect(raceSignal(Promise.resolve(7), controller.signal)).resolves.toBe(7);
    await expect(raceSignal(Promise.reject(new Error('boom')), controller.signal)).rejects.toThrow('boom');
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });
});

describe('withDeadline', () => {
  it('resolves with the result of the work', async () => {
    await expect(withDeadline(async () => 'done', { timeoutMs: 1000 })).resolves.toBe('done');
  });

  it('rejects with a TimeoutError and aborts the signal it handed to the work', async () => {
    const clock = manualClock();
    let seen: AbortSignal | undefined;
    const pending = withDeadline(
      (signal) => {
        seen = signal;
        return new Promise(() => {});
      },
      { timeoutMs: 30, clock },
    );
    clock.advance(30);
    await expect(pending).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(seen?.aborted).toBe(true);
  });

  it("rejects with the caller's reason, never a timeout, when the caller aborts", async () => {
    const caller = new AbortController();
    const reason = new Error('caller gave up');
    const pending = withDeadline(() => new Promise(() => {}), { signal: caller.signal, timeoutMs: 10_000 });
    caller.abort(reason);
    await expect(pending).rejects.toBe(reason);
  });

  it('does not run the work when the signal is already aborted', async () => {
    const caller = new AbortController();
    caller.abort(new Error('before'));
    let ran = false;
    await expect(
      withDeadline(
        async () => {
          ran = true;
        },
        { signal: caller.signal },
      ),
    ).rejects.toThrow('before');
    expect(ran).toBe(false);
  });

  it('leaves no listener behind on a long-lived signal after 10,000 calls', async () => {
    const longLived = new AbortController();
    const clock = manualClock();
    for (let i = 0; i < 10_000; i++) {
      if (i % 3 === 0) {
        await withDeadline(async () => i, { signal: longLived.signal, timeoutMs: 1000, clock });
      } else if (i % 3 === 1) {
        await expect(
          withDeadline(async () => Promise.reject(new Error('fail')), { signal: longLived.signal, clock }),
        ).rejects.toThrow('fail');
      } else {
        const pending = withDeadline(() => new Promise(() => {}), { signal: longLived.signal, timeoutMs: 5, clock });
        clock.advance(5);
        await expect(pending).rejects.toMatchObject({ name: 'TimeoutError' });
      }
      if (i === 5000) expect(getEventListeners(longLived.signal, 'abort').length).toBe(0);
    }
    expect(getEventListeners(longLived.signal, 'abort')).toHaveLength(0);
    expect(clock.pending()).toBe(0);
    expect(KernelwardenError.isInstance(new DeadlineExceededError('x'))).toBe(true);
  });
});
