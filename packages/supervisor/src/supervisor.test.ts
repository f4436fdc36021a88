import { InvalidOptionsError } from '@kernelwarden/core';
import { Gate, ManualClock, RecordingKernel } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { BuildCancelledError, KernelFactoryError, KernelRestartError } from './errors.js';
import type { SupervisorEvent } from './slot-supervisor.js';
import { KernelSupervisor } from './supervisor.js';

async function flush(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe('KernelSupervisor.ensure', () => {
  it('reuses the live kernel with the same key and starts generations at 0', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const kernel = new RecordingKernel('a');
    let calls = 0;
    const factory = () => {
      calls++;
      return kernel;
    };
    const first = await sup.ensure('python', 'base', factory);
    const again = await sup.ensure('python', 'base', factory);
    expect(again).toBe(first);
    expect(first.generation).toBe(0);
    expect(calls).toBe(1);
    expect(sup.status('python')).toMatchObject({ state: 'running', alive: true, generation: 0, key: 'base' });
  });

  it('builds the replacement first, then swaps it in, bumps the generation and shuts the old one down', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const events: string[] = [];
    const old = new RecordingKernel('old', { events });
    await sup.ensure('python', 'base', () => old);
    const gate = new Gate();
    const replacement = new RecordingKernel('new', { events });
    const pending = sup.ensure('python', 'struct', async () => {
      await gate.wait();
      events.push('built');
      return replacement;
    });
    await flush();
    // While the replacement builds, the old kernel is still current and untouched.
    expect(sup.lease('python')?.kernel).toBe(old);
    expect(old.shutdownCalls).toBe(0);
    expect(sup.status('python').building).toBe(true);
    gate.open();
    const lease = await pending;
    expect(lease.kernel).toBe(replacement);
    expect(lease.generation).toBe(1);
    expect(events).toEqual(['built', 'old:shutdown']);
    expect(old.shutdownCalls).toBe(1);
  });

  it('leaves the current lease and generation untouched when the factory throws', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const old = new RecordingKernel('old');
    const first = await sup.ensure('python', 'base', () => old);
    const cause = new Error('struct worker failed to start');
    const failing = sup.ensure('python', 'struct', () => {
      throw cause;
    });
    await expect(failing).rejects.toSatisfy(
      (e: unknown) => KernelFactoryError.isInstance(e) && e.cause === cause && /failed to start/.test(e.message),
    );
    expect(sup.lease('python')).toBe(first);
    expect(sup.status('python').generation).toBe(0);
    expect(old.shutdownCalls).toBe(0);
  });

  it('rejects a factory that returns a dead kernel, and shuts that kernel down', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const dead = new RecordingKernel('dead');
    dead.live = false;
    await expect(sup.ensure('python', 'base', () => dead)).rejects.toMatchObject({ code: 'KERNEL_FACTORY' });
    expect(dead.shutdownCalls).toBe(1);
    expect(sup.lease('python')).toBeUndefined();
  });

  it('replaces a dead worker with the same key and shuts the dead one down', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const old = new RecordingKernel('old');
    await sup.ensure('python', 'base', () => old);
    old.live = false;
    expect(sup.status('python')).toMatchObject({ state: 'ended', alive: false, endedReason: 'worker_died' });
    const replacement = new RecordingKernel('replacement');
    let spawned = 0;
    const lease = await sup.ensure('python', 'base', () => {
      spawned++;
      return replacement;
    });
    expect(spawned).toBe(1);
    expect(lease.kernel).toBe(replacement);
    expect(lease.generation).toBe(1);
    expect(old.shutdownCalls).toBe(1);
  });

  it('shares one build between concurrent ensures of the same slot and key', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const gate = new Gate();
    let calls = 0;
    const factory = async () => {
      calls++;
      await gate.wait();
      return new RecordingKernel('k');
    };
    const a = sup.ensure('python', 'base', factory);
    const b = sup.ensure('python', 'base', factory);
    gate.open();
    const [la, lb] = await Promise.all([a, b]);
    expect(la).toBe(lb);
    expect(calls).toBe(1);
  });

  it('cancels an older build superseded by an ensure with another key, and shuts its kernel down when it arrives', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const gate = new Gate();
    const late = new RecordingKernel('late');
    let seenSignal: AbortSignal | undefined;
    const first = sup.ensure('python', 'a', async ({ signal }) => {
      seenSignal = signal;
      await gate.wait();
      return late;
    });
    const second = await sup.ensure('python', 'b', () => new RecordingKernel('b'));
    expect(seenSignal?.aborted).toBe(true);
    gate.open();
    await expect(first).rejects.toSatisfy((e: unknown) => BuildCancelledError.isInstance(e));
    expect(late.shutdownCalls).toBe(1);
    expect(sup.lease('python')).toBe(second);
  });

  it("rejects with the caller's reason when its signal aborts, and cancels a build nobody else waits for", async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const gate = new Gate();
    const kernel = new RecordingKernel('k');
    const controller = new AbortController();
    const pending = sup.ensure(
      'python',
      'base',
      async () => {
        await gate.wait();
        return kernel;
      },
      { signal: controller.signal },
    );
    const reason = new Error('user gave up');
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    gate.open();
    await sup.settled();
    expect(kernel.shutdownCalls).toBe(1);
    expect(sup.lease('python')).toBeUndefined();
  });

  it('names the bad argument', async () => {
    const sup = new KernelSupervisor();
    await expect(sup.ensure('', 'k', () => new RecordingKernel('x'))).rejects.toMatchObject({ path: 'slot' });
    await expect(sup.ensure('python', 'k', 'nope' as never)).rejects.toMatchObject({ path: 'factory' });
    expect(() => new KernelSupervisor({ idleTtlMs: 'soon' as never })).toThrow(InvalidOptionsError);
    expect(() => new KernelSupervisor({ clock: {} as never })).toThrow(/options\.clock/);
  });
});

describe('KernelSupervisor exact-lease operations', () => {
  it('do nothing to the current kernel when given a stale lease (ABA)', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const first = new RecordingKernel('first');
    const stale = await sup.ensure('python', 'a', () => first);
    const second = new RecordingKernel('second');
    const current = await sup.ensure('python', 'b', () => second);

    expect(await sup.interruptIfCurrent(stale)).toBe(false);
    expect(await sup.killIfCurrent(stale)).toBe(false);
    expect(await sup.restartIfCurrent(stale)).toBeUndefined();
    expect(await sup.shutdownIfCurrent(stale, 'desynchronized')).toBe(false);

    expect(second.interruptCalls + second.killCalls + second.restartCalls + second.shutdownCalls).toBe(0);
    expect(first.shutdownCalls).toBe(1);
    expect(sup.lease('python')).toBe(current);
    expect(sup.status('python').generation).toBe(1);
  });

  it('publishes the next generation without restart() when told the kill already restarted the kernel', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const kernel = new RecordingKernel('k', { killRestarts: true });
    const before = await sup.ensure('python', 'base', () => kernel);
    expect(await kernel.kill()).toEqual({ restarted: true });
    const after = await sup.restartIfCurrent(before, { alreadyRestarted: true });
    expect(after).toMatchObject({ kernel, generation: 1, key: 'base' });
    expect(kernel.restartCalls).toBe(0);
    expect(sup.lease('python')).toBe(after);
  });

  it('treat the lease a restart replaced as stale, although it names the same kernel object', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const kernel = new RecordingKernel('k');
    const before = await sup.ensure('python', 'base', () => kernel);
    const after = await sup.restartIfCurrent(before);
    expect(after).toMatchObject({ kernel, generation: 1, key: 'base' });
    expect(after?.id).not.toBe(before.id);
    expect(kernel.restartCalls).toBe(1);

    expect(await sup.interruptIfCurrent(before)).toBe(false);
    expect(await sup.killIfCurrent(before)).toBe(false);
    expect(await sup.restartIfCurrent(before)).toBeUndefined();
    expect(await sup.shutdownIfCurrent(before, 'x')).toBe(false);
    expect(kernel.interruptCalls + kernel.killCalls + kernel.shutdownCalls).toBe(0);
    expect(kernel.restartCalls).toBe(1);
  });

  it('act on the current lease: interrupt, kill, restart, then shutdown empties the slot', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const kernel = new RecordingKernel('k');
    const lease = await sup.ensure('python', 'base', () => kernel);
    expect(await sup.interruptIfCurrent(lease)).toBe(true);
    expect(await sup.killIfCurrent(lease)).toBe(true);
    const restarted = await sup.restartIfCurrent(lease);
    expect(restarted?.generation).toBe(1);
    expect(await sup.shutdownIfCurrent(restarted!, 'desynchronized')).toBe(true);
    expect(sup.lease('python')).toBeUndefined();
    expect(sup.status('python')).toMatchObject({ state: 'ended', endedReason: 'desynchronized', generation: 1 });
    expect([kernel.interruptCalls, kernel.killCalls, kernel.restartCalls, kernel.shutdownCalls]).toEqual([1, 1, 1, 1]);
  });

  it('empties the slot and rejects with KernelRestartError when the restart fails', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const kernel = new RecordingKernel('k');
    kernel.restart = async () => {
      throw new Error('restart refused');
    };
    const lease = await sup.ensure('python', 'base', () => kernel);
    await expect(sup.restartIfCurrent(lease)).rejects.toSatisfy((e: unknown) => KernelRestartError.isInstance(e));
    expect(sup.lease('python')).toBeUndefined();
    expect(sup.status('python').endedReason).toBe('restart_failed');
    expect(kernel.shutdownCalls).toBe(1);
  });
});

describe('KernelSupervisor never waits on a factory, restart or bootstrap', () => {
  it('answers interrupt, status, lease and stop while a build is held', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const current = new RecordingKernel('current');
    await sup.ensure('python', 'a', () => current);
    const gate = new Gate();
    const late = new RecordingKernel('late');
    const building = sup.ensure('python', 'b', async () => {
      await gate.wait();
      return late;
    });
    await flush();
    expect(await sup.interrupt('python')).toBe(1);
    expect(sup.status('python')).toMatchObject({ state: 'running', building: true });
    expect(sup.lease('python')?.kernel).toBe(current);
    expect(await sup.stop('python')).toBe(1);
    expect(sup.status('python')).toMatchObject({ state: 'stopped', manualStop: true, endedReason: 'manual_stop' });
    await expect(building).rejects.toMatchObject({ code: 'BUILD_CANCELLED' });
    gate.open();
    await sup.settled();
    expect(late.shutdownCalls).toBe(1);
    expect(sup.lease('python')).toBeUndefined();
  });

  it('answers interrupt and status while a restart is held', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const kernel = new RecordingKernel('k');
    const gate = new Gate();
    const realRestart = kernel.restart.bind(kernel);
    kernel.restart = async (opts) => {
      await gate.wait();
      await realRestart(opts);
    };
    const lease = await sup.ensure('python', 'base', () => kernel);
    const restarting = sup.restartIfCurrent(lease);
    await flush();
    expect(sup.status('python')).toMatchObject({ restarting: true, generation: 0 });
    expect(await sup.interrupt('python')).toBe(1);
    gate.open();
    expect((await restarting)?.generation).toBe(1);
    expect(sup.status('python').restarting).toBe(false);
  });
});

describe('KernelSupervisor stop and shutdownAll', () => {
  it('records a manual stop of a slot that never held a kernel, and keeps generations monotonic across stop/start', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    await sup.stop('python');
    expect(sup.status('python')).toMatchObject({ state: 'stopped', manualStop: true, generation: 0 });
    const a = await sup.ensure('python', 'base', () => new RecordingKernel('a'));
    expect(a.generation).toBe(0);
    await sup.stop('python');
    const b = await sup.ensure('python', 'base', () => new RecordingKernel('b'));
    expect(b.generation).toBe(1);
    expect(sup.status('python')).toMatchObject({ state: 'running', manualStop: false });
    expect(sup.status('python').endedReason).toBeUndefined();
  });

  it('shutdownAll stops every slot and refuses further ensures', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const py = new RecordingKernel('py');
    const r = new RecordingKernel('r');
    await sup.ensure('python', 'base', () => py);
    await sup.ensure('r', 'default', () => r);
    await sup.shutdownAll();
    expect([py.shutdownCalls, r.shutdownCalls]).toEqual([1, 1]);
    expect(sup.status('r')).toMatchObject({ state: 'ended', endedReason: 'shutdown' });
    await expect(sup.ensure('python', 'base', () => new RecordingKernel('x'))).rejects.toMatchObject({
      code: 'CLOSED',
    });
  });

  it('emits typed events for publish, restart and end', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const seen: SupervisorEvent<RecordingKernel>['type'][] = [];
    sup.on('published', (e) => seen.push(e.type));
    sup.on('restarted', (e) => seen.push(e.type));
    const off = sup.on('ended', (e) => seen.push(e.type));
    sup.on('build_failed', (e) => seen.push(e.type));
    const lease = await sup.ensure('python', 'base', () => new RecordingKernel('k'));
    await sup.restartIfCurrent(lease);
    await sup
      .ensure('python', 'x', () => {
        throw new Error('no');
      })
      .catch(() => {});
    await sup.stop('python');
    off();
    await sup.ensure('python', 'base', () => new RecordingKernel('k2'));
    await sup.stop('python');
    expect(seen).toEqual(['published', 'restarted', 'build_failed', 'ended', 'published']);
  });
});

describe('KernelSupervisor idle expiry', () => {
  it('shuts an unused slot down after idleTtlMs and reports ended / idle_ttl; a hold keeps it alive', async () => {
    const clock = new ManualClock();
    const sup = new KernelSupervisor<RecordingKernel>({ idleTtlMs: 1000, clock });
    const kernel = new RecordingKernel('k');
    await sup.ensure('python', 'base', () => kernel);
    const hold = sup.hold('python');
    await clock.advance(5000);
    expect(sup.status('python').state).toBe('running');
    hold.release();
    await clock.advance(999);
    expect(sup.status('python').state).toBe('running');
    await sup.ensure('python', 'base', () => new RecordingKernel('unused'));
    await clock.advance(999);
    expect(sup.status('python').state).toBe('running');
    await clock.advance(1);
    expect(sup.status('python')).toMatchObject({ state: 'ended', alive: false, endedReason: 'idle_ttl' });
    expect(kernel.shutdownCalls).toBe(1);
    expect(clock.pendingTimers()).toBe(0);
  });
});

describe('KernelSupervisor.ensure during a restart', () => {
  it('waits for an in-flight restart of the same-key kernel instead of replacing it', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const kernel = new RecordingKernel('k');
    const gate = new Gate();
    const realRestart = kernel.restart.bind(kernel);
    kernel.restart = async (opts) => {
      kernel.live = false; // dead while restarting, as after a kill
      await gate.wait();
      await realRestart(opts);
    };
    const lease = await sup.ensure('python', 'base', () => kernel);
    const restarting = sup.restartIfCurrent(lease);
    let built = 0;
    const ensuring = sup.ensure('python', 'base', () => {
      built++;
      return new RecordingKernel('replacement');
    });
    await flush();
    expect(built).toBe(0);
    gate.open();
    const restarted = await restarting;
    expect(await ensuring).toBe(restarted);
    expect(built).toBe(0);
    expect(kernel.shutdownCalls).toBe(0);
  });
});

describe('signals on waiting operations', () => {
  it("stop({ signal }) stops waiting with the caller's reason, while the slot is emptied at once and the shutdown goes on", async () => {
    const supervisor = new KernelSupervisor<RecordingKernel>();
    const release = new Gate();
    const kernel = new RecordingKernel('slow');
    const shutdown = kernel.shutdown.bind(kernel);
    kernel.shutdown = async (opts) => {
      await release.wait();
      return shutdown(opts);
    };
    await supervisor.ensure('python', 'base', () => kernel);
    const controller = new AbortController();
    const stopping = supervisor.stop('python', { signal: controller.signal });
    const reason = new Error('caller gave up');
    controller.abort(reason);
    await expect(stopping).rejects.toBe(reason);
    expect(supervisor.lease('python')).toBeUndefined();
    expect(supervisor.status('python').state).toBe('stopped');
    release.open();
    await supervisor.settled();
    expect(kernel.shutdownCalls).toBe(1);
  });

  it('passes the signal to the kernel on interrupt and kill, and rejects with its reason when already aborted', async () => {
    const supervisor = new KernelSupervisor<RecordingKernel>();
    const kernel = new RecordingKernel('k');
    const seen: (AbortSignal | undefined)[] = [];
    const interrupt = kernel.interrupt.bind(kernel);
    kernel.interrupt = (opts) => {
      seen.push(opts?.signal);
      return interrupt(opts);
    };
    const lease = await supervisor.ensure('python', 'base', () => kernel);
    const controller = new AbortController();
    await expect(supervisor.interruptIfCurrent(lease, { signal: controller.signal })).resolves.toBe(true);
    expect(seen[0]).toBe(controller.signal);
    controller.abort(new Error('no more'));
    await expect(supervisor.killIfCurrent(lease, { signal: controller.signal })).rejects.toThrow('no more');
    await expect(supervisor.interrupt('python', { signal: controller.signal })).rejects.toThrow('no more');
    expect(kernel.killCalls).toBe(0);
  });
});

describe('unconfirmed shutdowns', () => {
  it('retries a shutdown that came back unconfirmed, in the background, until it is confirmed', async () => {
    const clock = new ManualClock();
    const supervisor = new KernelSupervisor<RecordingKernel>({ clock });
    const kernel = new RecordingKernel('restarting-on-the-server');
    const answers = [{ confirmed: false }, { confirmed: false }, { confirmed: true }];
    const shutdown = kernel.shutdown.bind(kernel);
    kernel.shutdown = async (opts) => {
      await shutdown(opts);
      return answers.shift() ?? { confirmed: true };
    };
    await supervisor.ensure('r', '', () => kernel);
    await supervisor.stop('r');
    expect(kernel.shutdownCalls).toBe(1);
    await clock.advance(500);
    expect(kernel.shutdownCalls).toBe(2);
    await clock.advance(2000);
    expect(kernel.shutdownCalls).toBe(3);
    await clock.advance(60_000);
    expect(kernel.shutdownCalls).toBe(3);
    await supervisor.settled();
    expect(clock.pendingTimers()).toBe(0);
  });
});

describe('KernelSupervisor: a kernel handle published again', () => {
  it('shuts the handle down once per time a factory hands it over', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const kernel = new RecordingKernel('reused');
    await sup.ensure('python', 'a', () => kernel);
    await sup.stop('python');
    expect(kernel.shutdownCalls).toBe(1);
    await kernel.restart();
    await sup.ensure('python', 'a', () => kernel);
    expect(sup.status('python')).toMatchObject({ state: 'running', generation: 1 });
    await sup.stop('python');
    expect(kernel.shutdownCalls).toBe(2);
    await sup.shutdownAll();
    await sup.settled();
    expect(kernel.shutdownCalls).toBe(2);
  });

  it('does not shut down the kernel it just published when a factory hands the current one over for another key', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const kernel = new RecordingKernel('same');
    await sup.ensure('python', 'a', () => kernel);
    const lease = await sup.ensure('python', 'b', () => kernel);
    expect(lease).toMatchObject({ key: 'b', generation: 1 });
    expect(kernel.shutdownCalls).toBe(0);
    expect(sup.status('python')).toMatchObject({ state: 'running', alive: true });
    await sup.shutdownAll();
    expect(kernel.shutdownCalls).toBe(1);
  });
});

describe('KernelSupervisor.acquire with prepare', () => {
  it('prepares the new kernel before it is published; a failing prepare shuts it down and changes nothing', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const old = new RecordingKernel('old');
    const first = await sup.ensure('python', 'a', () => old);
    const failed = new RecordingKernel('failed');
    const failure = new Error('bootstrap failed');
    const events: string[] = [];
    sup.on('build_failed', (e) => events.push(`build_failed:${e.key}`));
    await expect(
      sup.acquire('python', 'b', () => failed, {
        prepare: () => {
          throw failure;
        },
      }),
    ).rejects.toBe(failure);
    expect(sup.lease('python')).toBe(first);
    expect(failed.shutdownCalls).toBe(1);
    expect(old.shutdownCalls).toBe(0);
    expect(events).toEqual(['build_failed:b']);

    const gate = new Gate();
    const next = new RecordingKernel('next');
    const pending = sup.acquire('python', 'b', () => next, { prepare: () => gate.wait() });
    await flush();
    expect(sup.lease('python')).toBe(first);
    expect(sup.status('python')).toMatchObject({ building: true, generation: 0 });
    gate.open();
    expect(await pending).toMatchObject({ outcome: 'built', lease: { key: 'b', generation: 1, kernel: next } });
    expect(old.shutdownCalls).toBe(1);
  });

  it('shuts a kernel being prepared down at once when the slot is stopped', async () => {
    const sup = new KernelSupervisor<RecordingKernel>();
    const kernel = new RecordingKernel('preparing');
    const entered = new Gate();
    const pending = sup.acquire('python', 'a', () => kernel, {
      prepare: async () => {
        entered.open();
        await new Gate().wait(); // ignores its signal
      },
    });
    const outcome = pending.catch((error: { code?: string }) => error.code);
    await entered.wait();
    await sup.stop('python');
    expect(await outcome).toBe('BUILD_CANCELLED');
    expect(kernel.shutdownCalls).toBe(1);
    expect(sup.lease('python')).toBeUndefined();
  });
});

describe('KernelSupervisor: a stop that lands while a prepared build is being published', () => {
  it('never publishes a kernel from a build the stop revoked, whatever microtask the stop lands in', async () => {
    for (let depth = 0; depth < 12; depth++) {
      const sup = new KernelSupervisor<RecordingKernel>();
      const old = new RecordingKernel('old');
      await sup.ensure('python', 'a', () => old);
      const gate = new Gate();
      const next = new RecordingKernel('next');
      const pending = sup.acquire('python', 'b', () => next, { prepare: () => gate.wait() }).catch(() => undefined);
      await flush();
      gate.open();
      let stop = (): void => {
        void sup.stop('python');
      };
      for (let i = 0; i < depth; i++) {
        const inner = stop;
        stop = () => queueMicrotask(inner);
      }
      stop();
      await pending;
      await flush();
      await sup.settled();
      expect({ depth, lease: sup.lease('python'), state: sup.status('python').state }).toEqual({
        depth,
        lease: undefined,
        state: 'stopped',
      });
      expect([old.shutdownCalls, next.shutdownCalls]).toEqual([1, 1]);
    }
  });
});
