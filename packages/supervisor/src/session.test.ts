import { getEventListeners } from 'node:events';
import type { ExecuteResult, ReadIsolationPolicy } from '@kernelwarden/core';
import { Gate, ManualClock, RecordingKernel, okResult as testkitOkResult } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { plainExecutor } from './executor.js';
import type { LanguageSlot, LanguageSlotContext } from './language-slot.js';
import type { Lease } from './lease.js';
import { KernelSession } from './session.js';
import type { SlotFactoryContext } from './session-options.js';
import type { KernelStatusEvent } from './session-status.js';

async function flush(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
}

function okResult(cellId: string, stdout = ''): ExecuteResult {
  return { ...testkitOkResult(cellId), stdout };
}

function statuses(session: KernelSession<any, any>): string[] {
  const seen: string[] = [];
  session.on('kernel_status', (e: KernelStatusEvent) => seen.push(e.status));
  return seen;
}

/** A tiny R LanguageSlot: keeps its kernel in the session supervisor's 'r' slot, keyed by environment. */
function fakeRSlot(
  spawn: (ctx: LanguageSlotContext) => RecordingKernel,
): LanguageSlot & { seen: LanguageSlotContext[] } {
  const seen: LanguageSlotContext[] = [];
  let supervisor: LanguageSlotContext['supervisor'] | undefined;
  return {
    language: 'r',
    seen,
    async ensure(ctx) {
      seen.push(ctx);
      supervisor = ctx.supervisor;
      try {
        await ctx.supervisor.ensure('r', ctx.env ?? 'default', () => spawn(ctx));
        return null;
      } catch (error) {
        const cause = (error as { cause?: unknown }).cause;
        return `R kernel unavailable: ${cause instanceof Error ? cause.message : String(error)}`;
      }
    },
    lease: () => supervisor?.lease('r'),
    execute: (code, opts, ctx) => ctx.executor.run({ supervisor: ctx.supervisor, slot: 'r', code, ...opts }),
    async shutdown(reason) {
      const lease = supervisor?.lease('r');
      if (lease) await supervisor?.shutdownIfCurrent(lease, reason ?? 'shutdown');
    },
    status: () => {
      const s = supervisor?.status('r');
      return { env: s?.key, started: s?.state === 'running', alive: s?.alive ?? false, generation: s?.generation ?? 0 };
    },
  };
}

describe('KernelSession.stop (seed 1)', () => {
  it('interrupts both slots, waits for the running execution to leave the barrier, then shuts down and stays cancelled', async () => {
    const events: string[] = [];
    const python = new RecordingKernel('python', { events, hold: true });
    python.releaseOnInterrupt = true;
    const r = new RecordingKernel('r', { events });
    const session = new KernelSession<RecordingKernel>({ python: () => python });
    await session.supervisor.ensure('r', 'default', () => r);

    const running = session.execute('pass');
    await python.executeEntered.wait();
    await session.stop();
    const result = await running;

    expect(python.interruptCalls).toBe(1);
    expect(r.interruptCalls).toBe(1);
    expect(events.indexOf('python:interrupt')).toBeLessThan(events.indexOf('python:execute-exit'));
    expect(events.indexOf('python:execute-exit')).toBeLessThan(events.indexOf('python:shutdown'));
    expect(python.shutdownCalls).toBe(1);
    expect(r.shutdownCalls).toBe(1);
    expect(result.cellId).toBeTypeOf('string');
    expect(session.status()).toMatchObject({ state: 'stopped', manualStop: true, cancelled: true });
    expect(session.cancelled).toBe(true);
    await session.close();
  });

  it('stays cancelled until the next execute, which clears it', async () => {
    const session = new KernelSession<RecordingKernel>({ python: () => new RecordingKernel('k') });
    await session.start();
    await session.stop();
    expect(session.cancelled).toBe(true);
    await flush();
    expect(session.cancelled).toBe(true);
    const result = await session.execute('1');
    expect(result.status).toBe('ok');
    expect(session.cancelled).toBe(false);
    expect(session.status().state).toBe('running');
    await session.close();
  });

  it('cancels executions queued behind the running one', async () => {
    const python = new RecordingKernel('python', { hold: true });
    python.releaseOnInterrupt = true;
    const session = new KernelSession<RecordingKernel>({ python: () => python });
    const running = session.execute('first');
    await python.executeEntered.wait();
    const queued = session.execute('second', { cellId: 'queued' });
    await session.stop();
    expect(await queued).toMatchObject({ cellId: 'queued', cancelled: true, status: 'aborted' });
    await running;
    expect(python.executeCalls).toBe(1);
    await session.close();
  });
});

describe('KernelSession stop intent (seed 2)', () => {
  it('makes a start issued during a paused stop wait for it: stopped then started, old shut down once', async () => {
    const pause = new Gate();
    const entered = new Gate();
    const current = new RecordingKernel('current');
    const replacement = new RecordingKernel('replacement');
    const made: RecordingKernel[] = [];
    const kernels = [current, replacement];
    const session = new KernelSession<RecordingKernel>({
      python: () => {
        const k = kernels.shift()!;
        made.push(k);
        return k;
      },
      // An executor that ignores the abort until the gate opens: the stop stays paused after cancelling.
      executor: {
        run: async (req) => {
          entered.open();
          await pause.wait();
          return plainExecutor.run(req);
        },
      },
    });
    const seen = statuses(session);
    await session.start();
    const turn = session.execute('long()');
    await entered.wait();

    const stopping = session.stop();
    expect(session.cancelled).toBe(true);
    const starting = session.start();
    await flush();
    // The stop is paused after cancelling (the turn ignores its abort): the start has not begun.
    expect(made).toEqual([current]);
    expect(current.shutdownCalls).toBe(0);
    expect(seen.at(-1)).toBe('started');
    expect(session.status().stopping).toBe(true);

    pause.open();
    await stopping;
    const status = await starting;
    await turn;

    expect(current.shutdownCalls).toBe(1);
    expect(session.supervisor.lease('python')?.kernel).toBe(replacement);
    expect(session.cancelled).toBe(false);
    expect(status).toMatchObject({ state: 'running', generation: 1 });
    expect(seen.slice(-2)).toEqual(['stopped', 'started']);
    await session.close();
  });

  it('orders a start issued right after stop() behind it even with nothing running', async () => {
    const session = new KernelSession<RecordingKernel>({ python: () => new RecordingKernel('k') });
    const seen = statuses(session);
    await session.start();
    const stopping = session.stop();
    const starting = session.start();
    await Promise.all([stopping, starting]);
    expect(seen).toEqual(['started', 'stopped', 'started']);
    expect(session.cancelled).toBe(false);
    await session.close();
  });

  it('drops a start that was queued before a stop issued after it (the stop wins)', async () => {
    const python = new RecordingKernel('python', { hold: true });
    python.releaseOnInterrupt = true;
    const session = new KernelSession<RecordingKernel>({ python: () => python });
    const seen = statuses(session);
    const running = session.execute('x');
    await python.executeEntered.wait();
    const starting = session.start();
    await session.stop();
    await expect(starting).rejects.toMatchObject({ code: 'SESSION_STOPPED' });
    await running;
    expect(seen.at(-1)).toBe('stopped');
    expect(session.status().state).toBe('stopped');
    await session.close();
  });
});

describe('KernelSession dead worker (seed 3)', () => {
  it('replaces a dead python worker on the next execute and shuts the dead one down', async () => {
    const old = new RecordingKernel('old');
    const replacement = new RecordingKernel('replacement');
    const queue = [old, replacement];
    let spawned = 0;
    const session = new KernelSession<RecordingKernel>({
      python: () => {
        spawned++;
        return queue.shift()!;
      },
    });
    await session.start();
    old.live = false;
    await session.execute('1');
    expect(spawned).toBe(2);
    expect(session.supervisor.lease('python')?.kernel).toBe(replacement);
    expect(old.shutdownCalls).toBe(1);
    expect(replacement.executeCalls).toBe(1);
    await session.close();
  });
});

describe('KernelSession bootstrap outside the lock (seed 4)', () => {
  it('answers interrupt("python") and status at once while a bootstrap is blocked; the interrupt releases it', async () => {
    const kernel = new RecordingKernel('python', { hold: true });
    kernel.releaseOnInterrupt = true;
    const bootstrapped: RecordingKernel[] = [];
    const session = new KernelSession<RecordingKernel>({
      python: () => kernel,
      bootstrap: async (lease) => {
        await lease.kernel.execute('bootstrap()');
        bootstrapped.push(lease.kernel);
      },
    });
    const starting = session.start();
    await kernel.executeEntered.wait();
    expect(session.status()).toMatchObject({ state: 'running', turnRunning: true });
    expect(bootstrapped).toEqual([]);
    expect(await session.supervisor.interrupt('python')).toBe(1);
    await starting;
    expect(bootstrapped).toEqual([kernel]);
    await session.close();
  });

  it('answers interrupt while the bootstrap stays blocked (it does not wait for it)', async () => {
    const gate = new Gate();
    const kernel = new RecordingKernel('python');
    const session = new KernelSession<RecordingKernel>({
      python: () => kernel,
      bootstrap: () => gate.wait(),
    });
    const starting = session.start();
    await flush();
    expect(await session.supervisor.interrupt('python')).toBe(1);
    expect(session.status().alive).toBe(true);
    expect(gate.isOpen).toBe(false);
    gate.open();
    await starting;
    await session.close();
  });

  it('shuts the lease down and fails the call when bootstrap throws; the next execute builds afresh', async () => {
    let fail = true;
    const made: RecordingKernel[] = [];
    const session = new KernelSession<RecordingKernel>({
      python: () => {
        const k = new RecordingKernel(`k${made.length}`);
        made.push(k);
        return k;
      },
      bootstrap: () => {
        if (fail) throw new Error('sidecar import failed');
      },
    });
    await expect(session.execute('1')).rejects.toMatchObject({ code: 'BOOTSTRAP_FAILED' });
    expect(made[0]?.shutdownCalls).toBe(1);
    expect(session.status().endedReason).toBe('bootstrap_failed');
    fail = false;
    expect((await session.execute('1')).status).toBe('ok');
    expect(session.status().generation).toBe(1);
    await session.close();
  });
});

describe('KernelSession.setEnv (seed 5)', () => {
  it('is build-first and atomic: a failing build keeps kernel, host state, env and generation; a working one switches', async () => {
    let failStruct = true;
    const kernels: (RecordingKernel & { env?: string; ctx?: SlotFactoryContext<Host> })[] = [];
    interface Host {
      activeREnv: string | undefined;
    }
    let hosts = 0;
    const bootstrapped: RecordingKernel[] = [];
    const session = new KernelSession<RecordingKernel, Host>({
      env: 'base',
      cwd: '/work/space',
      createHost: () => {
        hosts++;
        return { activeREnv: undefined };
      },
      python: (ctx) => {
        if (ctx.env === 'struct' && failStruct) throw new Error('struct worker failed to start');
        const k = Object.assign(new RecordingKernel(`${ctx.env}-${ctx.purpose}`), { env: ctx.env, ctx });
        kernels.push(k);
        return k;
      },
      bootstrap: (lease) => {
        bootstrapped.push(lease.kernel);
      },
    });
    const seen = statuses(session);
    await session.start();
    const old = session.supervisor.lease('python')!.kernel;
    const host = session.host;
    host.activeREnv = 'r-special';

    const bg = session.runBackground('print(1)');
    await session.waitBackground(bg.execId);
    expect(kernels.at(-1)).toMatchObject({ env: 'base', ctx: { purpose: 'background', cwd: '/work/space' } });

    await expect(session.setEnv('struct')).rejects.toThrow(/failed to start/);
    expect(session.supervisor.lease('python')?.kernel).toBe(old);
    expect(session.host).toBe(host);
    expect(session.status()).toMatchObject({ env: 'base', desiredEnv: 'struct', generation: 0 });
    expect(old.shutdownCalls).toBe(0);

    failStruct = false;
    const changed = await session.setEnv('struct');
    expect(changed).toMatchObject({ generation: 1, env: 'struct', desiredEnv: 'struct', state: 'running' });
    const current = session.supervisor.lease('python')!.kernel as (typeof kernels)[number];
    expect(current).not.toBe(old);
    expect(current.env).toBe('struct');
    expect(current.ctx?.host).toBe(host);
    expect(hosts).toBe(1);
    expect(session.host.activeREnv).toBe('r-special');
    expect(old.shutdownCalls).toBe(1);
    expect(bootstrapped).toEqual([old, current]);
    expect(seen.at(-1)).toBe('env_changed');

    const bg2 = session.runBackground('print(2)');
    await session.waitBackground(bg2.execId);
    expect(kernels.at(-1)).toMatchObject({ env: 'struct', ctx: { purpose: 'background', cwd: '/work/space' } });
    await session.close();
  });

  it('only records the environment when no kernel runs, and the next start builds it', async () => {
    const envs: (string | undefined)[] = [];
    const session = new KernelSession<RecordingKernel>({
      python: (ctx) => {
        envs.push(ctx.env);
        return new RecordingKernel(String(ctx.env));
      },
    });
    await session.setEnv('struct');
    expect(envs).toEqual([]);
    await session.start();
    expect(envs).toEqual(['struct']);
    expect(session.status().key).toBe('struct');
    await session.close();
  });

  it('keeps running cells on the old kernel after a failed switch', async () => {
    const session = new KernelSession<RecordingKernel>({
      env: 'base',
      python: (ctx) => {
        if (ctx.env === 'broken') throw new Error('no such env');
        return new RecordingKernel(String(ctx.env));
      },
    });
    await session.start();
    await expect(session.setEnv('broken')).rejects.toMatchObject({ code: 'KERNEL_FACTORY' });
    expect((await session.execute('1')).status).toBe('ok');
    expect(session.status()).toMatchObject({ generation: 0, env: 'base', desiredEnv: 'broken' });
    await session.close();
  });
});

describe('KernelSession read isolation (seed 6)', () => {
  const policy: ReadIsolationPolicy = { roots: ['/data'], allowedRoots: ['/data/inputs/abc'] };

  it('hands the policy to the main kernel, a background kernel and the R kernel', async () => {
    const contexts: SlotFactoryContext[] = [];
    const rSpawns: LanguageSlotContext[] = [];
    const r = fakeRSlot((ctx) => {
      rSpawns.push(ctx);
      return new RecordingKernel('r');
    });
    const session = new KernelSession<RecordingKernel>({
      cwd: '/work/space',
      readIsolation: policy,
      r,
      python: (ctx) => {
        contexts.push(ctx);
        return new RecordingKernel(ctx.purpose);
      },
    });
    await session.start();
    const bg = session.runBackground('1');
    await session.waitBackground(bg.execId);
    const result = await session.execute('1 + 1', { language: 'r' });
    expect(result.status).toBe('ok');
    expect(contexts.map((c) => [c.purpose, c.readIsolation, c.cwd])).toEqual([
      ['main', policy, '/work/space'],
      ['background', policy, '/work/space'],
    ]);
    expect(rSpawns).toHaveLength(1);
    expect(rSpawns[0]).toMatchObject({ readIsolation: policy, cwd: '/work/space', env: undefined });
    await session.close();
  });

  it('runs a background cell as the very first action, with the policy, leaving the python slot unleased', async () => {
    const contexts: SlotFactoryContext[] = [];
    const session = new KernelSession<RecordingKernel>({
      cwd: '/work/space',
      readIsolation: policy,
      python: (ctx) => {
        contexts.push(ctx);
        return new RecordingKernel('bg', {
          execute: (_code, opts) => {
            opts?.onOutput?.({ type: 'stream', name: 'stdout', text: 'done' });
            return okResult(opts?.cellId ?? 'c', 'done');
          },
        });
      },
    });
    expect(session.supervisor.lease('python')).toBeUndefined();
    const { execId } = session.runBackground("print('first')");
    expect(execId).toMatch(/^exec-[0-9a-f]{12}$/);
    const peek = await session.waitBackground(execId);
    expect(peek).toMatchObject({ done: true, stdout: 'done', error: null, status: 'done' });
    expect(session.peekBackground(execId)).toMatchObject({ done: true, stdout: 'done', error: null });
    expect(contexts).toHaveLength(1);
    expect(contexts[0]).toMatchObject({ purpose: 'background', readIsolation: policy, cwd: '/work/space' });
    expect(session.supervisor.lease('python')).toBeUndefined();
    await session.close();
  });
});

describe('KernelSession R slot', () => {
  it('turns a soft failure into an RKernelUnavailable result without touching python', async () => {
    const python = new RecordingKernel('python');
    const r = fakeRSlot(() => {
      throw new Error('R is missing');
    });
    const session = new KernelSession<RecordingKernel>({ python: () => python, r });
    await session.start();
    const pyLease = session.supervisor.lease('python');
    const result = await session.execute('1', { language: 'r', cellId: 'r1' });
    expect(result).toMatchObject({
      status: 'error',
      cellId: 'r1',
      error: { ename: 'RKernelUnavailable', evalue: 'R kernel unavailable: R is missing', traceback: [] },
    });
    expect(session.supervisor.lease('python')).toBe(pyLease);
    expect(python.interruptCalls + python.shutdownCalls + python.executeCalls).toBe(0);
    await session.close();
  });

  it('hands the R environment to the slot', async () => {
    const r = fakeRSlot(() => new RecordingKernel('r'));
    const session = new KernelSession<RecordingKernel>({
      python: () => new RecordingKernel('p'),
      r,
      slotEnvs: { r: 'r-base' },
    });
    await session.execute('1', { language: 'r' });
    session.setSlotEnv('r', 'r-special');
    await session.execute('1', { language: 'r' });
    expect(r.seen.map((c) => c.env)).toEqual(['r-base', 'r-special']);
    expect(session.supervisor.status('r')).toMatchObject({ generation: 1, key: 'r-special' });
    await session.close();
  });
});

describe('KernelSession executor, events and close', () => {
  it('runs cells through the given executor with the exact lease, cell id and a bootstrap hook', async () => {
    const seen: { lease?: Lease<any>; cellId?: string; origin?: string; hasBootstrap: boolean }[] = [];
    const session = new KernelSession<RecordingKernel>({
      python: () => new RecordingKernel('p'),
      executor: {
        run: async (req) => {
          seen.push({
            ...(req.lease ? { lease: req.lease } : {}),
            ...(req.cellId ? { cellId: req.cellId } : {}),
            ...(req.origin ? { origin: req.origin } : {}),
            hasBootstrap: typeof req.bootstrap === 'function',
          });
          return okResult(req.cellId ?? 'x');
        },
      },
    });
    const result = await session.execute('1', { cellId: 'cell-shared', origin: 'agent' });
    expect(result.cellId).toBe('cell-shared');
    expect(seen).toEqual([
      { lease: session.supervisor.lease('python'), cellId: 'cell-shared', origin: 'agent', hasBootstrap: true },
    ]);
    await session.close();
  });

  it('emits restarted with generation + 1 when restarted in place, and re-runs bootstrap', async () => {
    const kernel = new RecordingKernel('p');
    let boots = 0;
    const session = new KernelSession<RecordingKernel>({
      python: () => kernel,
      bootstrap: () => {
        boots++;
      },
    });
    const events: KernelStatusEvent[] = [];
    session.on('kernel_status', (e) => events.push(e));
    await session.start();
    await session.restart();
    expect(kernel.restartCalls).toBe(1);
    expect(boots).toBe(2);
    expect(events.map((e) => [e.status, e.generation])).toEqual([
      ['started', 0],
      ['restarted', 1],
    ]);
    await session.close();
  });

  it('close() shuts everything down, emits ended, and refuses further work', async () => {
    const bgGate = new Gate();
    const made: RecordingKernel[] = [];
    const session = new KernelSession<RecordingKernel>({
      python: (ctx) => {
        const k = new RecordingKernel(ctx.purpose, {
          execute: async (_code, opts) => {
            if (ctx.purpose === 'background') await bgGate.wait(opts?.signal);
            return okResult('c');
          },
        });
        made.push(k);
        return k;
      },
    });
    const events: KernelStatusEvent[] = [];
    session.on('kernel_status', (e) => events.push(e));
    await session.start();
    const bg = session.runBackground('long()');
    await flush();
    await session.close();
    await session.close();
    expect(made.map((k) => k.shutdownCalls)).toEqual([1, 1]);
    expect(session.peekBackground(bg.execId)).toMatchObject({ done: true, status: 'interrupted' });
    expect(events.at(-1)).toMatchObject({ status: 'ended', endedReason: 'session_closed' });
    expect(session.status()).toMatchObject({ closed: true, state: 'ended', endedReason: 'session_closed' });
    await expect(session.execute('1')).rejects.toMatchObject({ code: 'CLOSED' });
    expect(() => session.runBackground('1')).toThrow(/closed/);
  });

  it('validates options and names the bad field', () => {
    expect(() => new KernelSession({} as never)).toThrow(/options\.python/);
    expect(() => new KernelSession({ python: () => new RecordingKernel('x'), spares: { size: -1 } })).toThrow(
      /options\.spares\.size/,
    );
    expect(
      () => new KernelSession({ python: () => new RecordingKernel('x'), readIsolation: { roots: 'x' } as never }),
    ).toThrow(/options\.readIsolation\.roots/);
    expect(() => new KernelSession({ python: () => new RecordingKernel('x'), executor: {} as never })).toThrow(
      /options\.executor\.run/,
    );
  });

  it("settles a cell cancelled by the caller's signal with cancelled: true", async () => {
    const python = new RecordingKernel('python', { hold: true });
    python.releaseOnInterrupt = true;
    const session = new KernelSession<RecordingKernel>({ python: () => python });
    await session.start();
    const controller = new AbortController();
    controller.abort(new Error('gave up'));
    const result = await session.execute('1', { signal: controller.signal, cellId: 'c9' });
    expect(result).toMatchObject({ cancelled: true, cellId: 'c9' });
    await session.close();
  });
});

describe('KernelSession idle expiry and signals', () => {
  it('ends an idle python slot after idleTtlMs (ended / idle_ttl), never during a cell, and starts afresh on the next execute', async () => {
    const clock = new ManualClock();
    const made: RecordingKernel[] = [];
    const gate = new Gate();
    const session = new KernelSession<RecordingKernel>({
      idleTtlMs: 60_000,
      clock,
      python: () => {
        const k = new RecordingKernel(`k${made.length}`, {
          execute: async (_c, opts) => {
            await gate.wait();
            return okResult(opts.cellId);
          },
        });
        made.push(k);
        return k;
      },
    });
    const events: KernelStatusEvent[] = [];
    session.on('kernel_status', (e) => events.push(e));
    const cell = session.execute('long()');
    await made[0]?.executeEntered.wait();
    await clock.advance(120_000); // a running cell holds the slot: no expiry
    expect(session.status().state).toBe('running');
    gate.open();
    await cell;
    await clock.advance(59_999);
    expect(session.status().state).toBe('running');
    await clock.advance(1);
    expect(session.status()).toMatchObject({ state: 'ended', alive: false, endedReason: 'idle_ttl' });
    expect(made[0]?.shutdownCalls).toBe(1);
    expect(events.at(-1)).toMatchObject({ status: 'ended', endedReason: 'idle_ttl', slot: 'python' });
    await session.execute('again()');
    expect(session.status()).toMatchObject({ state: 'running', generation: 1 });
    await session.close();
    expect(clock.pendingTimers()).toBe(0);
  });

  it('leaves no listener on a long-lived caller signal after 10,000 cells', async () => {
    const session = new KernelSession<RecordingKernel>({ python: () => new RecordingKernel('k') });
    const longLived = new AbortController();
    for (let i = 0; i < 10_000; i++) await session.execute('1', { signal: longLived.signal });
    expect(getEventListeners(longLived.signal, 'abort')).toHaveLength(0);
    await session.close();
  });
});

describe('KernelSession background cells', () => {
  it('reports an unknown id and refuses more than maxBackground running cells', async () => {
    const gate = new Gate();
    const session = new KernelSession<RecordingKernel>({
      maxBackground: 1,
      python: () =>
        new RecordingKernel('bg', {
          execute: async (_c, opts) => {
            await gate.wait(opts.signal);
            return okResult(opts.cellId);
          },
        }),
    });
    expect(() => session.peekBackground('exec-nope')).toThrow(
      expect.objectContaining({ code: 'BACKGROUND_NOT_FOUND' }),
    );
    const first = session.runBackground('a');
    expect(() => session.runBackground('b')).toThrow(expect.objectContaining({ code: 'BACKGROUND_LIMIT' }));
    expect(session.status().backgroundRunning).toBe(1);
    gate.open();
    expect(await session.waitBackground(first.execId)).toMatchObject({ done: true, status: 'done' });
    const second = session.runBackground('c');
    await session.waitBackground(second.execId);
    await session.close();
  });

  it('interrupts a running background cell and shuts its kernel down; a cell error is reported as ename: evalue', async () => {
    const made: RecordingKernel[] = [];
    const session = new KernelSession<RecordingKernel>({
      python: () => {
        const k = new RecordingKernel('bg', {
          execute: async (code, opts) => {
            if (code === 'raise') {
              const error = { ename: 'ValueError', evalue: 'bad', traceback: [] };
              return { ...okResult(opts.cellId), status: 'error', error };
            }
            await new Gate().wait(opts.signal);
            return okResult(opts.cellId);
          },
        });
        made.push(k);
        return k;
      },
    });
    const failing = session.runBackground('raise');
    expect(await session.waitBackground(failing.execId)).toMatchObject({ status: 'failed', error: 'ValueError: bad' });
    const hanging = session.runBackground('hang');
    await made[1]?.executeEntered.wait();
    expect(await session.interruptBackground(hanging.execId)).toBe(true);
    expect(await session.waitBackground(hanging.execId)).toMatchObject({ done: true, status: 'interrupted' });
    expect(await session.interruptBackground(hanging.execId)).toBe(false);
    expect(made.map((k) => k.shutdownCalls)).toEqual([1, 1]);
    expect(session.supervisor.lease('python')).toBeUndefined();
    await session.close();
  });
});

describe('KernelSession: the last intent wins', () => {
  function counting() {
    const made: RecordingKernel[] = [];
    const session = new KernelSession<RecordingKernel>({
      python: () => {
        const k = new RecordingKernel(`k${made.length}`);
        made.push(k);
        return k;
      },
    });
    return { made, session, seen: statuses(session) };
  }

  it('drops a start issued between two stops: when the last stop resolves the session is stopped', async () => {
    const { made, session, seen } = counting();
    await session.start();
    const first = session.stop();
    const between = session.start();
    const last = session.stop();
    const dropped = between.then(
      () => 'started',
      (error: { code?: string }) => error.code,
    );
    await last;
    expect(session.status()).toMatchObject({ state: 'stopped', cancelled: true });
    await first;
    expect(await dropped).toBe('SESSION_STOPPED');
    await flush();
    expect(session.status().state).toBe('stopped');
    expect(made).toHaveLength(1);
    expect(seen).toEqual(['started', 'stopped']);
    await session.close();
  });

  it('cancels a cell issued between two stops: it never runs, and no kernel is built for it', async () => {
    const { made, session } = counting();
    await session.start();
    const first = session.stop();
    const cell = session.execute('x = 1', { cellId: 'between' });
    const last = session.stop();
    await last;
    await first;
    expect(await cell).toMatchObject({ cellId: 'between', status: 'aborted', cancelled: true });
    await flush();
    expect(made).toHaveLength(1);
    expect(made[0]?.executeCalls).toBe(0);
    expect(session.status().state).toBe('stopped');
    await session.close();
  });

  it('still runs a start issued after the last stop, once that stop is done: stopped then started', async () => {
    const { made, session, seen } = counting();
    await session.start();
    const first = session.stop();
    const dropped = session.start().catch((error: { code?: string }) => error.code);
    const last = session.stop();
    const after = session.start();
    await Promise.all([first, last]);
    expect(await dropped).toBe('SESSION_STOPPED');
    expect(await after).toMatchObject({ state: 'running', generation: 1 });
    expect(made).toHaveLength(2);
    expect(seen).toEqual(['started', 'stopped', 'started']);
    await session.close();
  });
});

describe('KernelSession.setEnv is atomic through its bootstrap', () => {
  function switching(bootstrap: (lease: Lease<RecordingKernel>, signal: AbortSignal) => void | Promise<void>) {
    const made: RecordingKernel[] = [];
    const session = new KernelSession<RecordingKernel>({
      env: 'base',
      python: (ctx) => {
        const k = new RecordingKernel(String(ctx.env));
        made.push(k);
        return k;
      },
      bootstrap: (lease, ctx) => bootstrap(lease, ctx.signal),
    });
    return { made, session, seen: statuses(session) };
  }

  it('keeps the old kernel, environment, generation and session working when the new bootstrap fails', async () => {
    const { made, session, seen } = switching((lease) => {
      if (lease.key === 'broken') throw new Error('import sidecar failed');
    });
    await session.start();
    const old = session.supervisor.lease('python')!;

    await expect(session.setEnv('broken')).rejects.toMatchObject({ code: 'BOOTSTRAP_FAILED' });

    expect(session.supervisor.lease('python')).toBe(old);
    expect(old.kernel.shutdownCalls).toBe(0);
    expect(made[1]?.name).toBe('broken');
    expect(made[1]?.shutdownCalls).toBe(1);
    expect(session.status()).toMatchObject({
      state: 'running',
      env: 'base',
      desiredEnv: 'broken',
      generation: 0,
      key: 'base',
    });
    expect(seen).toEqual(['started']);
    const after = await session.execute('1', { cellId: 'after' });
    expect(after).toMatchObject({ status: 'ok', cellId: 'after' });
    expect(old.kernel.executeCalls).toBe(1);
    await session.close();
  });

  it('swaps the new kernel in only once it is bootstrapped; interrupt and status answer meanwhile', async () => {
    const gate = new Gate();
    const entered = new Gate();
    const booted: { name: string; generation: number; current: boolean }[] = [];
    let supervisor: KernelSession<RecordingKernel>['supervisor'] | undefined;
    const { made, session, seen } = switching(async (lease) => {
      booted.push({
        name: lease.kernel.name,
        generation: lease.generation,
        current: supervisor?.lease('python')?.kernel === lease.kernel,
      });
      if (lease.key === 'struct') {
        entered.open();
        await gate.wait();
      }
    });
    supervisor = session.supervisor;
    await session.start();
    const old = session.supervisor.lease('python')!;
    const switched = session.setEnv('struct');
    await entered.wait();

    expect(session.supervisor.lease('python')).toBe(old);
    expect(session.status()).toMatchObject({ state: 'running', env: 'base', building: true, generation: 0 });
    expect(await session.supervisor.interrupt('python')).toBe(1);
    expect(old.kernel.shutdownCalls).toBe(0);

    gate.open();
    expect(await switched).toMatchObject({ env: 'struct', generation: 1, state: 'running' });
    expect(session.supervisor.lease('python')?.kernel).toBe(made[1]);
    expect(old.kernel.shutdownCalls).toBe(1);
    expect(booted).toEqual([
      { name: 'base', generation: 0, current: true },
      { name: 'struct', generation: -1, current: false },
    ]);
    expect(seen).toEqual(['started', 'env_changed']);
    await session.close();
  });

  it('a stop during the switch bootstrap shuts both kernels down once and drops the switch', async () => {
    const entered = new Gate();
    const { made, session, seen } = switching(async (lease, signal) => {
      if (lease.key !== 'struct') return;
      entered.open();
      await new Gate().wait(signal);
    });
    await session.start();
    const switched = session.setEnv('struct').catch((error: { code?: string }) => error.code);
    await entered.wait();
    await session.stop();
    expect(await switched).toBe('SESSION_STOPPED');
    await session.supervisor.settled();
    expect(made.map((k) => [k.name, k.shutdownCalls])).toEqual([
      ['base', 1],
      ['struct', 1],
    ]);
    expect(session.status()).toMatchObject({ state: 'stopped', env: 'base', desiredEnv: 'struct', generation: 0 });
    expect(seen).toEqual(['started', 'stopped']);
    await session.close();
  });
});

describe('KernelSession: a kernel handle published again', () => {
  it('is shut down again on the next stop', async () => {
    const kernel = new RecordingKernel('reused');
    const session = new KernelSession<RecordingKernel>({
      python: async () => {
        // A factory that hands out the same handle again, revived (a cached connection, say).
        if (!kernel.isAlive()) await kernel.restart();
        return kernel;
      },
    });
    await session.start();
    await session.stop();
    expect(kernel.shutdownCalls).toBe(1);
    await session.start();
    expect(session.status()).toMatchObject({ state: 'running', generation: 1 });
    await session.stop();
    expect(kernel.shutdownCalls).toBe(2);
    expect(kernel.isAlive()).toBe(false);
    await session.close();
    expect(kernel.shutdownCalls).toBe(2);
  });
});
