import { getEventListeners } from 'node:events';
import { RecordingKernel } from '@kernelwarden/testkit';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KernelSession } from './session.js';

describe('200 sessions on one caller signal', () => {
  const warnings: Error[] = [];
  const onWarning = (warning: Error) => warnings.push(warning);
  beforeEach(() => {
    warnings.length = 0;
    process.on('warning', onWarning);
  });
  afterEach(() => {
    process.off('warning', onWarning);
  });

  it('run cells at once with no MaxListenersExceededWarning; the signal keeps one listener while they run, none after', async () => {
    const shared = new AbortController();
    const sessions = Array.from(
      { length: 200 },
      (_, i) => new KernelSession<RecordingKernel>({ python: () => new RecordingKernel(`k${i}`) }),
    );
    const running = sessions.map((s) => s.execute('1', { signal: shared.signal }));
    expect(getEventListeners(shared.signal, 'abort').length).toBeLessThanOrEqual(1);
    await Promise.all(running);
    expect(getEventListeners(shared.signal, 'abort')).toHaveLength(0);
    await Promise.all(sessions.map((s) => s.close()));
    await new Promise((r) => setImmediate(r));
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
  });
});
