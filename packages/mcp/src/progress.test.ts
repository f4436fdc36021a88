import { ManualClock } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { ProgressReporter, type ProgressUpdate } from './progress.js';

function reporter() {
  const clock = new ManualClock();
  const sent: ProgressUpdate[] = [];
  const progress = new ProgressReporter((u) => sent.push(u), { clock, intervalMs: 250, heartbeatMs: 10_000 });
  return { clock, sent, progress };
}

describe('ProgressReporter', () => {
  it('sends the first output at once and coalesces what follows within the interval', async () => {
    const { clock, sent, progress } = reporter();
    progress.start();
    await clock.advance(1_000);
    progress.onOutput({ type: 'stream', name: 'stdout', text: 'a\n' });
    progress.onOutput({ type: 'stream', name: 'stdout', text: 'b\n' });
    progress.onOutput({ type: 'stream', name: 'stderr', text: '\x1b[31mc\x1b[0m\n' });
    expect(sent).toEqual([{ progress: 1, message: 'a\n' }]);
    await clock.advance(250);
    expect(sent).toEqual([
      { progress: 1, message: 'a\n' },
      { progress: 2, message: 'b\nc\n' },
    ]);
    progress.stop();
    expect(clock.pendingTimers()).toBe(0);
  });

  it('sends a heartbeat when the cell is silent, with a counter that keeps going up', async () => {
    const { clock, sent, progress } = reporter();
    progress.start();
    await clock.advance(10_000);
    await clock.advance(10_000);
    expect(sent).toEqual([
      { progress: 1, message: 'still running (10s)' },
      { progress: 2, message: 'still running (20s)' },
    ]);
    progress.stop();
    await clock.advance(60_000);
    expect(sent).toHaveLength(2);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('sends nothing after stop, even for output pending its interval', async () => {
    const { clock, sent, progress } = reporter();
    progress.start();
    progress.onOutput({ type: 'stream', name: 'stdout', text: 'x' });
    progress.onOutput({ type: 'stream', name: 'stdout', text: 'y' });
    progress.stop();
    await clock.advance(1_000);
    expect(sent).toEqual([]);
    expect(clock.pendingTimers()).toBe(0);
  });
});
