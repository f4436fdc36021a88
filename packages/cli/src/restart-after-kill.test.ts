import type { ExecuteResult, KernelHandle } from '@kernelwarden/core';
import { describe, expect, it } from 'vitest';
import { skipRestartAfterKill } from './restart-after-kill.js';

function fakeKernel(opts: { killLeavesAlive: boolean }) {
  const calls: string[] = [];
  let alive = true;
  const kernel: KernelHandle = {
    id: 'k1',
    isAlive: () => alive,
    execute: async (code) => {
      calls.push(`execute ${code}`);
      return { status: 'ok', cellId: 'c' } as ExecuteResult;
    },
    interrupt: async () => {
      calls.push('interrupt');
      return { delivered: true };
    },
    kill: async () => {
      calls.push('kill');
      alive = opts.killLeavesAlive;
    },
    restart: async () => {
      calls.push('restart');
      alive = true;
    },
    shutdown: async () => {
      calls.push('shutdown');
      alive = false;
      return { confirmed: true };
    },
  };
  return { kernel, calls };
}

describe('skipRestartAfterKill', () => {
  it('skips the restart that follows a kill which already restarted the interpreter (a gateway kill)', async () => {
    const { kernel, calls } = fakeKernel({ killLeavesAlive: true });
    const wrapped = skipRestartAfterKill(kernel);
    await wrapped.kill();
    await wrapped.restart();
    expect(calls).toEqual(['kill']);
    await wrapped.restart();
    expect(calls).toEqual(['kill', 'restart']);
  });

  it('restarts for real after a kill that left the kernel dead, or when a cell ran since the kill', async () => {
    const dead = fakeKernel({ killLeavesAlive: false });
    const wrappedDead = skipRestartAfterKill(dead.kernel);
    await wrappedDead.kill();
    await wrappedDead.restart();
    expect(dead.calls).toEqual(['kill', 'restart']);

    const busy = fakeKernel({ killLeavesAlive: true });
    const wrappedBusy = skipRestartAfterKill(busy.kernel);
    await wrappedBusy.kill();
    await wrappedBusy.execute('x = 1');
    await wrappedBusy.restart();
    expect(busy.calls).toEqual(['kill', 'execute x = 1', 'restart']);
  });

  it('passes everything else through', async () => {
    const { kernel, calls } = fakeKernel({ killLeavesAlive: true });
    const wrapped = skipRestartAfterKill(kernel);
    expect(wrapped.id).toBe('k1');
    expect(await wrapped.interrupt()).toEqual({ delivered: true });
    expect(await wrapped.shutdown()).toEqual({ confirmed: true });
    expect(wrapped.isAlive()).toBe(false);
    expect(calls).toEqual(['interrupt', 'shutdown']);
  });
});
