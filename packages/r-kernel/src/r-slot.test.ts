import { InvalidOptionsError, type ReadIsolationPolicy } from '@kernelwarden/core';
import { KernelSession, KernelSupervisor, type LanguageSlotContext, plainExecutor } from '@kernelwarden/supervisor';
import { Gate, okResult, RecordingKernel } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { createRSlot, R_SLOT, type RSpawnContext } from './r-slot.js';

function harness(opts: { failEnv?: string } = {}) {
  const supervisor = new KernelSupervisor<RecordingKernel>();
  const created: RecordingKernel[] = [];
  const spawns: RSpawnContext[] = [];
  const slot = createRSlot<RecordingKernel>({
    spawn: (ctx) => {
      spawns.push(ctx);
      if (opts.failEnv !== undefined && ctx.env === opts.failEnv) throw new Error('R is missing');
      const kernel = new RecordingKernel(ctx.env ?? 'default');
      created.push(kernel);
      return kernel;
    },
  });
  const ctx = (env: string | undefined, extra: Partial<LanguageSlotContext> = {}): LanguageSlotContext => ({
    supervisor,
    env,
    executor: plainExecutor,
    ...extra,
  });
  return { supervisor, slot, created, spawns, ctx };
}

describe('createRSlot', () => {
  it('starts nothing until the first ensure, then reuses the same kernel', async () => {
    const h = harness();
    expect(h.created).toHaveLength(0);
    expect(h.slot.lease()).toBeUndefined();
    expect(await h.slot.ensure(h.ctx(undefined))).toBeNull();
    const first = h.slot.lease();
    expect(first?.kernel).toBe(h.created[0]);
    expect(await h.slot.ensure(h.ctx(undefined))).toBeNull();
    expect(h.slot.lease()).toBe(first);
    expect(h.created).toHaveLength(1);
  });

  it('replaces the kernel when the R environment changes and shuts the first down once', async () => {
    const h = harness();
    await h.slot.ensure(h.ctx(undefined));
    const first = h.created[0]!;
    expect(await h.slot.ensure(h.ctx('r-special'))).toBeNull();
    const second = h.created[1]!;
    expect(h.slot.lease()?.kernel).toBe(second);
    expect(first.shutdownCalls).toBe(1);
    expect(second.shutdownCalls).toBe(0);
    expect(h.slot.status()).toMatchObject({ env: 'r-special', alive: true, generation: 1 });
  });

  it('soft-fails a broken environment with exactly "R kernel unavailable: R is missing" and touches nothing', async () => {
    const h = harness({ failEnv: 'broken' });
    const python = new RecordingKernel('python');
    const pyLease = await h.supervisor.ensure('python', 'base', () => python);
    await h.slot.ensure(h.ctx('r-special'));
    const current = h.slot.lease();

    await expect(h.slot.ensure(h.ctx('broken'))).resolves.toBe('R kernel unavailable: R is missing');

    expect(h.slot.lease()).toBe(current);
    expect(current?.kernel.shutdownCalls).toBe(0);
    expect(current?.kernel.isAlive()).toBe(true);
    expect(h.slot.status()).toMatchObject({ env: 'r-special', lastError: 'R kernel unavailable: R is missing' });
    expect(h.supervisor.lease('python')).toBe(pyLease);
    expect(python.shutdownCalls + python.interruptCalls).toBe(0);
    // A later good ensure clears the error.
    expect(await h.slot.ensure(h.ctx('r-special'))).toBeNull();
    expect(h.slot.status().lastError).toBeUndefined();
  });

  it('hands the spawn the working directory, the environment and the read-isolation policy', async () => {
    const h = harness();
    const policy: ReadIsolationPolicy = { roots: ['/srv/data'], allowedRoots: ['/srv/data/users/alice'] };
    await h.slot.ensure(h.ctx(undefined, { cwd: '/work/session', readIsolation: policy }));
    expect(h.spawns).toHaveLength(1);
    expect(h.spawns[0]).toMatchObject({ cwd: '/work/session', env: undefined, readIsolation: policy });
    expect(h.spawns[0]?.signal).toBeInstanceOf(AbortSignal);
  });

  it('replaces a dead R kernel on the next ensure', async () => {
    const h = harness();
    await h.slot.ensure(h.ctx(undefined));
    h.created[0]!.live = false;
    expect(await h.slot.ensure(h.ctx(undefined))).toBeNull();
    expect(h.created).toHaveLength(2);
    expect(h.slot.lease()?.kernel).toBe(h.created[1]);
  });

  it('an execution that throws rethrows, empties the R slot and shuts that exact kernel down once', async () => {
    const supervisor = new KernelSupervisor<RecordingKernel>();
    const broken = new RecordingKernel('r', {
      execute: () => {
        throw new Error('malformed protocol frame');
      },
    });
    const slot = createRSlot({ spawn: () => broken });
    const ctx: LanguageSlotContext = { supervisor, env: undefined, executor: plainExecutor };
    expect(await slot.ensure(ctx)).toBeNull();
    await expect(slot.execute("stop('bad frame')", {}, ctx)).rejects.toThrow('malformed protocol frame');
    expect(slot.lease()).toBeUndefined();
    expect(supervisor.status(R_SLOT)).toMatchObject({ state: 'ended', endedReason: 'desynchronized' });
    expect(broken.shutdownCalls).toBe(1);
  });

  it('runs the bootstrap once per new generation, and a failing bootstrap soft-fails and discards that kernel', async () => {
    const supervisor = new KernelSupervisor<RecordingKernel>();
    const booted: string[] = [];
    let failBoot = false;
    const kernels: RecordingKernel[] = [];
    const slot = createRSlot<RecordingKernel>({
      spawn: () => {
        const k = new RecordingKernel(`r${kernels.length}`);
        kernels.push(k);
        return k;
      },
      bootstrap: async (lease) => {
        booted.push(lease.kernel.name);
        if (failBoot) throw new Error('library(ggplot2) failed');
      },
    });
    const ctx = (env?: string): LanguageSlotContext => ({ supervisor, env, executor: plainExecutor });
    await slot.ensure(ctx());
    await slot.ensure(ctx());
    expect(booted).toEqual(['r0']);
    failBoot = true;
    await expect(slot.ensure(ctx('other'))).resolves.toBe(
      'R kernel unavailable: bootstrap failed: library(ggplot2) failed',
    );
    expect(kernels[1]?.shutdownCalls).toBe(1);
    expect(slot.lease()).toBeUndefined();
  });

  it('rejects invalid options naming the field', () => {
    expect(() => createRSlot({} as never)).toThrow(InvalidOptionsError);
    expect(() => createRSlot({} as never)).toThrow(/options\.spawn/);
    expect(() => createRSlot({ spawn: () => new RecordingKernel('r'), bootstrap: 5 } as never)).toThrow(
      /options\.bootstrap/,
    );
  });
});

describe('the R slot in a KernelSession', () => {
  it('soft-fails an R cell as an error result while Python keeps working', async () => {
    const python = new RecordingKernel('python', { execute: (_c, o) => ({ ...okResult(o.cellId), stdout: 'py\n' }) });
    const session = new KernelSession<RecordingKernel>({
      python: () => python,
      r: createRSlot({
        spawn: () => {
          throw new Error('R is missing');
        },
      }),
    });
    try {
      const first = await session.execute('print(1)');
      expect(first.stdout).toBe('py\n');
      const r = await session.execute('cat(3)', { language: 'r', cellId: 'r-cell' });
      expect(r).toMatchObject({
        status: 'error',
        cellId: 'r-cell',
        error: { ename: 'RKernelUnavailable', evalue: 'R kernel unavailable: R is missing' },
      });
      const again = await session.execute('print(2)');
      expect(again.status).toBe('ok');
      expect(python.shutdownCalls).toBe(0);
      expect(python.executeCalls).toBe(2);
    } finally {
      await session.close();
    }
  });

  it('routes R cells to the R kernel, through the session executor, with the cell id unchanged', async () => {
    const rKernel = new RecordingKernel('r', { execute: (_c, o) => ({ ...okResult(o.cellId), stdout: '3' }) });
    const ran: string[] = [];
    const session = new KernelSession<RecordingKernel>({
      python: () => new RecordingKernel('python'),
      r: createRSlot({ spawn: () => rKernel }),
      executor: {
        run: (req) => {
          ran.push(`${req.slot}:${req.cellId}`);
          return plainExecutor.run(req);
        },
      },
    });
    try {
      const result = await session.execute('cat(3)', { language: 'r', cellId: 'cell-r-1' });
      expect(result).toMatchObject({ status: 'ok', stdout: '3', cellId: 'cell-r-1' });
      expect(ran).toEqual(['r:cell-r-1']);
      expect(rKernel.executions[0]?.code).toBe('cat(3)');
    } finally {
      await session.close();
    }
    expect(rKernel.shutdownCalls).toBe(1);
  });
});

describe('an R cell cancelled by stop()', () => {
  it('comes back cancelled while R is being spawned, and leaves the R slot’s state untouched', async () => {
    const spawning = new Gate();
    const slot = createRSlot<RecordingKernel>({
      spawn: async (ctx) => {
        spawning.open();
        await new Gate().wait(ctx.signal);
        return new RecordingKernel('r');
      },
    });
    const session = new KernelSession<RecordingKernel>({ python: () => new RecordingKernel('python'), r: slot });
    try {
      const cell = session.execute('cat(1)', { language: 'r', cellId: 'r-cancelled' });
      await spawning.wait();
      await session.stop();
      expect(await cell).toMatchObject({ status: 'aborted', cancelled: true, cellId: 'r-cancelled' });
      expect((await cell).error).toBeUndefined();
      expect(slot.status()).toEqual({ env: undefined, started: false, alive: false, generation: 0 });
    } finally {
      await session.close();
    }
  });

  it('comes back cancelled while the R bootstrap runs, without recording a soft failure', async () => {
    const booting = new Gate();
    const kernel = new RecordingKernel('r');
    const slot = createRSlot<RecordingKernel>({
      spawn: () => kernel,
      bootstrap: async () => {
        booting.open();
        // An R bootstrap the stop's interrupt breaks off.
        await kernel.executeRelease.wait();
        throw new Error('interrupted');
      },
    });
    kernel.releaseOnInterrupt = true;
    const session = new KernelSession<RecordingKernel>({ python: () => new RecordingKernel('python'), r: slot });
    try {
      const cell = session.execute('cat(1)', { language: 'r', cellId: 'r-booting' });
      await booting.wait();
      await session.stop();
      expect(await cell).toMatchObject({ status: 'aborted', cancelled: true, cellId: 'r-booting' });
      expect(slot.status().lastError).toBeUndefined();
      expect(kernel.shutdownCalls).toBe(1);
    } finally {
      await session.close();
    }
  });
});

describe('createRSlot with an aborted signal', () => {
  it('rejects ensure() with the signal’s reason and records no soft failure', async () => {
    const h = harness();
    const controller = new AbortController();
    const reason = new Error('gave up');
    controller.abort(reason);
    await expect(h.slot.ensure(h.ctx(undefined, { signal: controller.signal }))).rejects.toBe(reason);
    expect(h.slot.status().lastError).toBeUndefined();
    expect(h.created).toHaveLength(0);
  });
});
