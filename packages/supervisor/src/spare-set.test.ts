import { Gate, RecordingKernel } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { KernelSession } from './session.js';
import type { SlotFactoryContext } from './session-options.js';
import { KernelSupervisor } from './supervisor.js';

async function flush(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe('spares', () => {
  it('hands a ready kernel to ensure without calling the slow factory, and refills in the background', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const spareGate = new Gate();
    const made: RecordingKernel[] = [];
    sup.configureSpares(
      'python',
      'base',
      async () => {
        await spareGate.wait();
        const k = new RecordingKernel(`spares${made.length}`);
        made.push(k);
        return k;
      },
      { size: 1 },
    );
    expect(sup.sparesStatus('python', 'base')).toMatchObject({ ready: 0, filling: true });
    spareGate.open();
    await flush();
    expect(sup.sparesStatus('python', 'base')).toMatchObject({ ready: 1, filling: false });

    spareGate.reset();
    const neverStarts = new Gate();
    const result = await sup.acquire('python', 'base', async () => {
      await neverStarts.wait();
      return new RecordingKernel('cold');
    });
    expect(result.outcome).toBe('spare');
    expect(result.lease.kernel).toBe(made[0]);
    expect(result.lease.generation).toBe(0);
    // The refill started at once and waits for its own start.
    expect(sup.sparesStatus('python', 'base')).toMatchObject({ ready: 0, filling: true });
    spareGate.open();
    await flush();
    expect(sup.sparesStatus('python', 'base')).toMatchObject({ ready: 1, filling: false });
    expect(made).toHaveLength(2);

    await sup.shutdownAll();
    await sup.settled();
    expect(made.map((k) => k.shutdownCalls)).toEqual([1, 1]);
  });

  it('shuts down a kernel still starting when the spares are drained', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const gate = new Gate();
    const late = new RecordingKernel('late');
    let signal: AbortSignal | undefined;
    sup.configureSpares(
      'python',
      'base',
      async (ctx) => {
        signal = ctx.signal;
        expect(ctx.purpose).toBe('spare');
        await gate.wait();
        return late;
      },
      { size: 1 },
    );
    await sup.drainSpares('python');
    expect(signal?.aborted).toBe(true);
    gate.open();
    await sup.settled();
    expect(late.shutdownCalls).toBe(1);
  });

  it('stops refilling after a failing build, and resumes on the next hand-over', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    let fail = true;
    let calls = 0;
    sup.configureSpares(
      'python',
      'base',
      () => {
        calls++;
        if (fail) throw new Error('no kernel today');
        return new RecordingKernel('k');
      },
      { size: 2 },
    );
    await flush();
    expect(calls).toBe(1);
    expect(sup.sparesStatus('python', 'base').lastError).toBeInstanceOf(Error);
    fail = false;
    await sup.ensure('python', 'base', () => new RecordingKernel('cold'));
    await flush();
    // The failed spare set does not hand over, but a miss resumes the refill.
    expect(sup.sparesStatus('python', 'base').ready).toBe(2);
    await sup.shutdownAll();
  });
});

describe('KernelSession with spares', () => {
  it('starts bootstrapped spares, hands one over on the first execute, refills, and close() shuts all down', async () => {
    const made: RecordingKernel[] = [];
    const bootstrapped: { kernel: RecordingKernel; purpose: string }[] = [];
    const contexts: SlotFactoryContext[] = [];
    const session = new KernelSession<RecordingKernel>({
      env: 'base',
      spares: { size: 1 },
      python: (ctx) => {
        contexts.push(ctx);
        const k = new RecordingKernel(`k${made.length}`);
        made.push(k);
        return k;
      },
      bootstrap: (lease, ctx) => {
        bootstrapped.push({ kernel: lease.kernel, purpose: ctx.purpose });
      },
    });
    await flush();
    expect(made).toHaveLength(1);
    expect(bootstrapped).toEqual([{ kernel: made[0], purpose: 'spare' }]);

    await session.execute('1');
    expect(session.supervisor.lease('python')?.kernel).toBe(made[0]);
    // The handed-over kernel was bootstrapped once, before hand-over, and not again as a new generation.
    expect(bootstrapped.filter((b) => b.kernel === made[0])).toEqual([{ kernel: made[0], purpose: 'spare' }]);
    expect(bootstrapped.every((b) => b.purpose === 'spare')).toBe(true);
    await flush();
    expect(made).toHaveLength(2);
    expect(contexts.map((c) => c.purpose)).toEqual(['spare', 'spare']);

    await session.close();
    expect(made.map((k) => k.shutdownCalls)).toEqual([1, 1]);
  });
});
