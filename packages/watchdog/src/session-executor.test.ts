import { type ExecuteOptions, type ExecuteResult, emptyResult } from '@kernelwarden/core';
import { KernelSession, type KernelStatusEvent } from '@kernelwarden/supervisor';
import { ManualClock, RecordingKernel } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { CellTimeoutError, createWatchdog } from './index.js';

async function flush(rounds = 10): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe('createWatchdog as a KernelSession executor', () => {
  it('resets a hung cell’s kernel in place: restarted event, bootstrap again, the next cell runs', async () => {
    const clock = new ManualClock();
    const kernel = new RecordingKernel('python', {
      execute: async (code: string, opts: ExecuteOptions, k: RecordingKernel): Promise<ExecuteResult> => {
        if (code === 'hang()') await k.executeRelease.wait();
        return emptyResult(opts.cellId ?? '', { stdout: code });
      },
    });
    const bootstrapped: number[] = [];
    const session = new KernelSession({
      python: () => kernel,
      bootstrap: (lease) => {
        bootstrapped.push(lease.generation);
      },
      executor: createWatchdog({ cellTimeoutMs: 5_000, interruptGraceMs: 1_000, killGraceMs: 1_000, clock }),
    });
    const statuses: KernelStatusEvent[] = [];
    session.on('kernel_status', (event) => statuses.push(event));
    try {
      expect((await session.execute('1', { cellId: 'warm' })).cellId).toBe('warm');
      kernel.executeRelease.reset();
      kernel.executeEntered.reset();
      const hung = session.execute('hang()', { cellId: 'stuck' }).then(
        () => undefined,
        (error: unknown) => error,
      );
      await kernel.executeEntered.wait();
      await clock.advance(6_000);
      const error = await hung;
      expect(CellTimeoutError.isInstance(error)).toBe(true);
      expect((error as Error).message).toMatch(/^cell exceeded 5s /);
      expect(statuses.map((s) => [s.status, s.generation])).toContainEqual(['restarted', 1]);
      expect(bootstrapped).toEqual([0, 1]);
      const next = await session.execute('2', { cellId: 'after' });
      expect(next.stdout).toBe('2');
      expect(session.status().generation).toBe(1);
      expect([kernel.interruptCalls, kernel.killCalls, kernel.restartCalls]).toEqual([1, 1, 1]);
    } finally {
      await session.close();
    }
  });

  it('lets stop() interrupt a cell that ignores it once, then shut down: no kill, restart, bootstrap or grace', async () => {
    const clock = new ManualClock();
    const kernel = new RecordingKernel('python', { hold: true });
    const watchdog = createWatchdog({ cellTimeoutMs: 60_000, interruptGraceMs: 1_000, killGraceMs: 1_000, clock });
    const rungs: string[] = [];
    watchdog.on('*', (event) => rungs.push(`${event.type}:${event.reason}`));
    const bootstrapped: number[] = [];
    const session = new KernelSession({
      python: () => kernel,
      executor: watchdog,
      bootstrap: (lease) => {
        bootstrapped.push(lease.generation);
      },
    });
    const statuses: string[] = [];
    session.on('kernel_status', (event) => statuses.push(event.status));
    try {
      const running = session.execute('spin()', { cellId: 'spin' });
      await kernel.executeEntered.wait();
      let stopDone = false;
      const stopped = session.stop().then(() => {
        stopDone = true;
      });
      await flush();
      const doneBeforeAnyGrace = stopDone;
      await clock.advance(10_000);
      await stopped;
      // The stop did not wait for the graces: it was done before the clock moved.
      expect(doneBeforeAnyGrace).toBe(true);
      const result = await running;
      expect(result).toMatchObject({ cancelled: true, cellId: 'spin' });
      expect(rungs).toEqual([]);
      expect([kernel.interruptCalls, kernel.killCalls, kernel.restartCalls, kernel.shutdownCalls]).toEqual([
        1, 0, 0, 1,
      ]);
      expect(bootstrapped).toEqual([0]);
      expect(statuses).toEqual(['started', 'stopped']);
      expect(session.status()).toMatchObject({ state: 'stopped', generation: 0 });
      expect(clock.pendingTimers()).toBe(0);
    } finally {
      await session.close();
    }
  });

  it('breaks off a timeout ladder when the session stops: the kernel is shut down, never killed or restarted', async () => {
    const clock = new ManualClock();
    const kernel = new RecordingKernel('python', { hold: true });
    const watchdog = createWatchdog({ cellTimeoutMs: 5_000, interruptGraceMs: 1_000, killGraceMs: 1_000, clock });
    const rungs: string[] = [];
    watchdog.on('*', (event) => rungs.push(`${event.type}:${event.reason}`));
    const session = new KernelSession({ python: () => kernel, executor: watchdog });
    try {
      const running = session.execute('spin()', { cellId: 'spin' });
      await kernel.executeEntered.wait();
      await clock.advance(5_000); // the budget ran out: the ladder interrupted and waits its grace
      expect(kernel.interruptCalls).toBe(1);
      const stopped = session.stop();
      await clock.advance(10_000);
      await stopped;
      expect(await running).toMatchObject({ cancelled: true, cellId: 'spin' });
      expect(rungs).toEqual(['interrupt:timeout']);
      expect([kernel.interruptCalls, kernel.killCalls, kernel.restartCalls, kernel.shutdownCalls]).toEqual([
        2, 0, 0, 1,
      ]);
      expect(clock.pendingTimers()).toBe(0);
    } finally {
      await session.close();
    }
  });

  it('re-bootstraps a kernel reset after the caller gave up with a signal that is not aborted', async () => {
    const clock = new ManualClock();
    const kernel = new RecordingKernel('python', { hold: true });
    const watchdog = createWatchdog({ cellTimeoutMs: 60_000, interruptGraceMs: 1_000, killGraceMs: 1_000, clock });
    const boots: { generation: number; aborted: boolean }[] = [];
    const session = new KernelSession({
      python: () => kernel,
      executor: watchdog,
      bootstrap: (lease, ctx) => {
        boots.push({ generation: lease.generation, aborted: ctx.signal.aborted });
        ctx.signal.throwIfAborted();
      },
    });
    try {
      const controller = new AbortController();
      const running = session.execute('spin()', { cellId: 'spin', signal: controller.signal });
      await kernel.executeEntered.wait();
      controller.abort(new Error('user gave up'));
      await clock.advance(2_000);
      expect(await running).toMatchObject({ cancelled: true, cellId: 'spin' });
      expect(boots).toEqual([
        { generation: 0, aborted: false },
        { generation: 1, aborted: false },
      ]);
      expect(session.status()).toMatchObject({ state: 'running', generation: 1 });
      kernel.hold = false;
      expect((await session.execute('1', { cellId: 'after' })).status).toBe('ok');
    } finally {
      await session.close();
    }
  });
});
