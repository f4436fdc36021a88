import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { ManualClock } from './manual-clock.js';
import { okResult, RecordingKernel, RecordingKernelError } from './recording-kernel.js';

describe('RecordingKernel', () => {
  it('answers with the default ok result and carries the cell id', async () => {
    const kernel = new RecordingKernel('python');
    const result = await kernel.execute('1 + 1', { cellId: 'c1', origin: 'agent' });
    expect(result).toEqual(okResult('c1'));
    expect(kernel.executeCalls).toBe(1);
    expect(kernel.executions).toEqual([{ code: '1 + 1', opts: { cellId: 'c1', origin: 'agent' } }]);
    expect(kernel.events).toEqual(['python:execute-enter', 'python:execute-exit']);
    const generated = await kernel.execute('2');
    expect(generated.cellId).toMatch(/\S/);
  });

  it('records the interleaving of several kernels in one shared event list', async () => {
    const events: string[] = [];
    const python = new RecordingKernel('python', { events, hold: true, releaseOnInterrupt: true });
    const r = new RecordingKernel('r', { events });
    const running = python.execute('pass');
    await python.executeEntered.wait();
    await r.interrupt();
    await python.interrupt();
    await running;
    await python.shutdown();
    expect(events).toEqual([
      'python:execute-enter',
      'r:interrupt',
      'python:interrupt',
      'python:execute-exit',
      'python:shutdown',
    ]);
    expect([python.interruptCalls, r.interruptCalls]).toEqual([1, 1]);
  });

  it('holds an execution until executeRelease opens', async () => {
    const kernel = new RecordingKernel('k', { hold: true });
    let done = false;
    const running = kernel.execute('x').then(() => {
      done = true;
    });
    await kernel.executeEntered.wait();
    await new Promise((r) => setImmediate(r));
    expect(done).toBe(false);
    kernel.executeRelease.open();
    await running;
    expect(done).toBe(true);
  });

  it('kill releases the held execution, which fails as on a real dead kernel, and marks the kernel dead', async () => {
    const kernel = new RecordingKernel('k', { hold: true });
    const running = kernel.execute('hang()');
    await kernel.executeEntered.wait();
    await kernel.kill();
    await expect(running).rejects.toSatisfy((e) => RecordingKernelError.isInstance(e) && e.code === 'KERNEL_KILLED');
    expect(kernel.isAlive()).toBe(false);
    expect(kernel.killCalls).toBe(1);
    expect(kernel.events).toEqual(['k:execute-enter', 'k:kill', 'k:execute-exit']);
    await expect(kernel.execute('again')).rejects.toSatisfy(
      (e) => RecordingKernelError.isInstance(e) && e.code === 'KERNEL_NOT_ALIVE',
    );
    await kernel.restart();
    expect(kernel.isAlive()).toBe(true);
    expect(kernel.restartCalls).toBe(1);
  });

  it('runs the execute script with the kernel, and records exit even when the script throws', async () => {
    const broken = new Error('malformed frame');
    const kernel = new RecordingKernel('k', {
      execute: async (code, opts, k) => {
        if (code === 'boom') throw broken;
        k.state.set('x', code);
        return { ...okResult(opts.cellId), stdout: `ran ${code}` };
      },
    });
    expect((await kernel.execute('a', { cellId: 'c' })).stdout).toBe('ran a');
    expect(kernel.state.get('x')).toBe('a');
    await expect(kernel.execute('boom')).rejects.toBe(broken);
    expect(kernel.events.at(-1)).toBe('k:execute-exit');
    await kernel.restart();
    expect(kernel.state.size).toBe(0);
  });

  it('settles at once as cancelled when the signal aborts, without interrupting on its own', async () => {
    const kernel = new RecordingKernel('k', { hold: true });
    const controller = new AbortController();
    const running = kernel.execute('spin()', { cellId: 'c9', signal: controller.signal });
    await kernel.executeEntered.wait();
    controller.abort();
    const result = await running;
    expect(result).toMatchObject({ status: 'aborted', cellId: 'c9', cancelled: true, timedOut: false });
    expect(kernel.interruptCalls).toBe(0);
  });

  it('marks timedOut when timeoutMs runs out on the injected clock', async () => {
    const clock = new ManualClock();
    const kernel = new RecordingKernel('k', { hold: true, clock });
    const running = kernel.execute('spin()', { timeoutMs: 1000 });
    await kernel.executeEntered.wait();
    await clock.advance(1000);
    expect(await running).toMatchObject({ status: 'aborted', cancelled: true, timedOut: true });
    expect(clock.pendingTimers()).toBe(0);
  });

  it('shutdown is confirmed and idempotent, marks the kernel dead and settles a held execution', async () => {
    const kernel = new RecordingKernel('k', { hold: true });
    const running = kernel.execute('x', { cellId: 'held' });
    await kernel.executeEntered.wait();
    await expect(kernel.shutdown()).resolves.toEqual({ confirmed: true });
    await expect(kernel.shutdown()).resolves.toEqual({ confirmed: true });
    expect(await running).toMatchObject({ status: 'aborted', cellId: 'held', cancelled: true });
    expect(kernel.isAlive()).toBe(false);
    expect(kernel.shutdownCalls).toBe(2);
  });

  it('lets a test replace a method to simulate a failing operation', async () => {
    const kernel = new RecordingKernel('k');
    kernel.restart = async () => {
      throw new Error('no free ports');
    };
    await expect(kernel.restart()).rejects.toThrow('no free ports');
  });

  it('gives every kernel a distinct id unless one is given', () => {
    expect(new RecordingKernel('a').id).not.toBe(new RecordingKernel('a').id);
    expect(new RecordingKernel('a', { id: 'fixed' }).id).toBe('fixed');
  });
});

describe('RecordingKernel listeners', () => {
  it('leaves no abort listener behind on a long-lived signal after 10,000 executions', async () => {
    const kernel = new RecordingKernel('k');
    const controller = new AbortController();
    for (let i = 0; i < 10_000; i++) await kernel.execute('x', { signal: controller.signal, timeoutMs: 60_000 });
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });
});
