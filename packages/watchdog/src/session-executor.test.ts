import type { ExecuteOptions, ExecuteResult } from '@kernelwarden/core';
import { KernelSession, type KernelStatusEvent } from '@kernelwarden/supervisor';
import { ManualClock, RecordingKernel } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { CellTimeoutError, createWatchdog } from './index.js';

describe('createWatchdog as a KernelSession executor', () => {
  it('resets a hung cell’s kernel in place: restarted event, bootstrap again, the next cell runs', async () => {
    const clock = new ManualClock();
    const kernel = new RecordingKernel('python', {
      execute: async (code: string, opts: ExecuteOptions, k: RecordingKernel): Promise<ExecuteResult> => {
        if (code === 'hang()') await k.executeRelease.wait();
        return {
          status: 'ok',
          cellId: opts.cellId ?? '',
          stdout: code,
          stderr: '',
          outputs: [],
          cancelled: false,
          timedOut: false,
          stdinRequested: false,
          truncated: false,
        };
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

  it('lets stop() through a cell that ignores the interrupt: the ladder runs, the turn ends cancelled, the kernel is shut down', async () => {
    const clock = new ManualClock();
    const kernel = new RecordingKernel('python', { hold: true });
    const watchdog = createWatchdog({ cellTimeoutMs: 60_000, interruptGraceMs: 1_000, killGraceMs: 1_000, clock });
    const rungs: string[] = [];
    watchdog.on('*', (event) => rungs.push(`${event.type}:${event.reason}`));
    const session = new KernelSession({ python: () => kernel, executor: watchdog });
    try {
      const running = session.execute('spin()', { cellId: 'spin' });
      await kernel.executeEntered.wait();
      const stopped = session.stop();
      await clock.advance(1_000);
      const result = await running;
      await stopped;
      expect(result.cancelled).toBe(true);
      expect(rungs).toEqual(['interrupt:cancelled', 'kill:cancelled', 'restart:cancelled', 'bootstrap:cancelled']);
      expect(kernel.shutdownCalls).toBe(1);
      expect(session.status().state).toBe('stopped');
    } finally {
      await session.close();
    }
  });
});
