import { ManualClock } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { DEFAULT_CLEANUP_RETRY } from './gateway-kernel-options.js';
import { deleteUntilConfirmed } from './start-cleanup.js';

describe('deleteUntilConfirmed', () => {
  it('sends the first DELETE at once and stops at the first confirmation', async () => {
    const clock = new ManualClock();
    const answers = [false, false, true];
    const sent: number[] = [];
    const cleanup = deleteUntilConfirmed(
      async () => {
        sent.push(clock.now());
        return answers.shift() ?? true;
      },
      { clock, timeoutMs: 1_000, retry: { attempts: 5, initialDelayMs: 100, maxDelayMs: 1_000 } },
    );
    expect(sent).toEqual([0]);
    expect(await cleanup.first).toBe(false);
    await clock.runAll();
    expect(await cleanup.done).toBe(true);
    expect(sent).toEqual([0, 100, 300]);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('bounds each attempt with timeoutMs by aborting its signal, backs off doubling up to maxDelayMs, and gives up', async () => {
    const clock = new ManualClock();
    const sent: number[] = [];
    const reasons: unknown[] = [];
    const cleanup = deleteUntilConfirmed(
      (signal) => {
        sent.push(clock.now());
        return new Promise<boolean>((_, reject) => {
          signal.addEventListener('abort', () => {
            reasons.push(signal.reason);
            reject(signal.reason);
          });
        });
      },
      { clock, timeoutMs: 1_000, retry: { attempts: 5, initialDelayMs: 100, maxDelayMs: 300 } },
    );
    await clock.runAll();
    expect(await cleanup.done).toBe(false);
    // Attempt n starts after attempt n-1's 1 s bound and a wait of 100, 200, 300, 300 ms.
    expect(sent).toEqual([0, 1_100, 2_300, 3_600, 4_900]);
    expect(reasons).toHaveLength(5);
    expect(reasons[0]).toMatchObject({ name: 'TimeoutError', timeoutMs: 1_000 });
    expect(clock.pendingTimers()).toBe(0);
  });

  it('counts a thrown DELETE as unconfirmed, never rejects, and has sane defaults', async () => {
    const clock = new ManualClock();
    let calls = 0;
    const cleanup = deleteUntilConfirmed(
      async () => {
        calls++;
        throw new Error('ECONNREFUSED');
      },
      { clock, timeoutMs: 0, retry: DEFAULT_CLEANUP_RETRY },
    );
    await clock.runAll();
    await expect(cleanup.done).resolves.toBe(false);
    expect(calls).toBe(DEFAULT_CLEANUP_RETRY.attempts);
    expect(clock.now()).toBe(250 + 500 + 1_000 + 2_000 + 4_000);
  });
});
