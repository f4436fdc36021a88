import { InvalidOptionsError } from '@kernelwarden/core';
import { Gate, okResult, RecordingKernel } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { KernelUnavailableError, UnknownLanguageError } from './errors.js';
import type { CellExecutor, CellRunRequest } from './executor.js';
import { createLanguageSlot } from './lazy-language-slot.js';
import { KernelSession } from './session.js';

/** A Julia slot built only from the supervisor's public parts: nothing in the package knows Julia. */
function juliaSlot(spawned: RecordingKernel[], fail?: () => string | undefined) {
  return createLanguageSlot<RecordingKernel, unknown, 'julia'>({
    language: 'julia',
    spawn: (ctx) => {
      const reason = fail?.();
      if (reason) throw new Error(reason);
      const kernel = new RecordingKernel(`julia-${ctx.env ?? 'default'}`, {
        execute: (code, opts) => ({ ...okResult(opts.cellId), stdout: `julia ran ${code}` }),
      });
      spawned.push(kernel);
      return kernel;
    },
  });
}

function recordingExecutor(): CellExecutor & { requests: CellRunRequest[] } {
  const requests: CellRunRequest[] = [];
  return {
    requests,
    run: (req) => {
      requests.push(req);
      const lease = req.lease ?? req.supervisor.lease(req.slot);
      return lease!.kernel.execute!(req.code, { ...(req.cellId ? { cellId: req.cellId } : {}) });
    },
  };
}

describe('KernelSession language slots by name', () => {
  it('runs a third language from its own slot, through the session executor, leaving Python alone', async () => {
    const spawned: RecordingKernel[] = [];
    const python = new RecordingKernel('python');
    const executor = recordingExecutor();
    const session = new KernelSession({ python: () => python, slots: { julia: juliaSlot(spawned) }, executor });
    expect(session.languages).toEqual(['python', 'julia']);
    expect(spawned).toHaveLength(0);

    const result = await session.execute('1 + 1', { language: 'julia', cellId: 'j1' });

    expect(result).toMatchObject({ status: 'ok', cellId: 'j1', stdout: 'julia ran 1 + 1' });
    expect(spawned).toHaveLength(1);
    expect(executor.requests.map((r) => [r.slot, r.lease?.kernel, r.cellId])).toEqual([['julia', spawned[0], 'j1']]);
    expect(session.supervisor.lease('julia')?.kernel).toBe(spawned[0]);
    expect(session.supervisor.lease('python')).toBeUndefined();
    expect(python.executeCalls).toBe(0);
    expect(session.status().slots).toEqual({
      julia: { env: undefined, started: true, alive: true, generation: 0 },
    });
    await session.close();
    expect(spawned[0]?.shutdownCalls).toBe(1);
  });

  it('keeps each slot on its own environment and replaces its kernel only when that changes', async () => {
    const spawned: RecordingKernel[] = [];
    const session = new KernelSession({
      python: () => new RecordingKernel('python'),
      slots: { julia: juliaSlot(spawned) },
      slotEnvs: { julia: '1.10' },
    });
    await session.execute('a', { language: 'julia' });
    await session.execute('b', { language: 'julia' });
    session.setSlotEnv('julia', '1.11');
    await session.execute('c', { language: 'julia' });

    expect(spawned.map((k) => k.id.replace(/-\d+$/, ''))).toEqual(['julia-1.10', 'julia-1.11']);
    expect(spawned[0]?.shutdownCalls).toBe(1);
    expect(session.status().slots.julia).toMatchObject({ env: '1.11', generation: 1 });
    await session.close();
  });

  it('takes r and other slots side by side, each with its status in slots', async () => {
    const spawned: RecordingKernel[] = [];
    const r = createLanguageSlot({ language: 'r', label: 'R', spawn: () => new RecordingKernel('r') });
    const session = new KernelSession({
      python: () => new RecordingKernel('p'),
      r,
      slots: { julia: juliaSlot(spawned) },
    });
    expect(session.languages).toEqual(['python', 'r', 'julia']);
    await session.execute('1', { language: 'r' });
    await session.execute('1', { language: 'julia' });
    const status = session.status();
    expect(Object.keys(status.slots)).toEqual(['r', 'julia']);
    expect(status.slots.r).toMatchObject({ started: true, alive: true });
    expect(status).not.toHaveProperty('r');
    await session.close();
  });

  it('shuts every language slot down on stop, and starts them again lazily', async () => {
    const spawned: RecordingKernel[] = [];
    const session = new KernelSession({ python: () => new RecordingKernel('p'), slots: { julia: juliaSlot(spawned) } });
    await session.execute('1', { language: 'julia' });
    await session.stop();
    expect(spawned[0]?.shutdownCalls).toBe(1);
    expect(session.status().slots.julia).toMatchObject({ started: false, alive: false });
    await session.execute('2', { language: 'julia' });
    expect(spawned).toHaveLength(2);
    await session.close();
  });

  it('cancels a cell whose slot is still starting when the session stops', async () => {
    const gate = new Gate();
    const session = new KernelSession({
      python: () => new RecordingKernel('p'),
      slots: {
        julia: createLanguageSlot({
          language: 'julia',
          spawn: async (ctx) => {
            await gate.wait(ctx.signal);
            return new RecordingKernel('julia');
          },
        }),
      },
    });
    const cell = session.execute('1', { language: 'julia', cellId: 'j' });
    await new Promise((resolve) => setImmediate(resolve));
    await session.stop();
    await expect(cell).resolves.toMatchObject({ status: 'aborted', cancelled: true, cellId: 'j' });
    expect(session.status().slots.julia?.lastError).toBeUndefined();
    await session.close();
  });

  it('answers a slot that cannot start with an error result that carries a KernelUnavailableError', async () => {
    const python = new RecordingKernel('python');
    const session = new KernelSession({
      python: () => python,
      slots: { julia: juliaSlot([], () => 'julia is not installed') },
    });
    await session.start();
    const result = await session.execute('1', { language: 'julia', cellId: 'j1' });

    expect(result).toMatchObject({
      status: 'error',
      cellId: 'j1',
      error: {
        ename: 'JuliaKernelUnavailable',
        evalue: 'Julia kernel unavailable: julia is not installed',
        traceback: [],
      },
    });
    const unavailable = KernelUnavailableError.fromResult(result);
    expect(KernelUnavailableError.isInstance(unavailable)).toBe(true);
    expect(unavailable).toMatchObject({
      code: 'KERNEL_UNAVAILABLE',
      language: 'julia',
      ename: 'JuliaKernelUnavailable',
    });
    // The marker is invisible to JSON and survives copies of the result.
    expect(JSON.parse(JSON.stringify(result.error))).toEqual({
      ename: 'JuliaKernelUnavailable',
      evalue: 'Julia kernel unavailable: julia is not installed',
      traceback: [],
    });
    expect(KernelUnavailableError.fromResult({ ...result })).toBe(unavailable);
    expect(KernelUnavailableError.fromResult(await session.execute('1'))).toBeUndefined();
    expect(python.executeCalls).toBe(1);
    await session.close();
  });

  it('rejects a language it has no slot for with UnknownLanguageError, an InvalidOptionsError at "language"', async () => {
    const session = new KernelSession({ python: () => new RecordingKernel('p') });
    const failure = await session.execute('1', { language: 'r' }).catch((error: unknown) => error);
    expect(UnknownLanguageError.isInstance(failure)).toBe(true);
    expect(InvalidOptionsError.isInstance(failure)).toBe(true);
    expect(failure).toMatchObject({ path: 'language', language: 'r', available: ['python'] });
    expect(() => session.setSlotEnv('r', 'x')).toThrow(UnknownLanguageError);
    await session.close();
  });

  it('refuses slots whose names do not match their language, a second R slot, and environments for no slot', () => {
    const python = () => new RecordingKernel('p');
    const julia = juliaSlot([]);
    const r = createLanguageSlot({ language: 'r', spawn: () => new RecordingKernel('r') });
    const pathOf = (make: () => unknown) => {
      try {
        make();
      } catch (error) {
        return InvalidOptionsError.isInstance(error)
          ? error.issues.map((issue) => issue.path)
          : ['not invalid options'];
      }
      return [];
    };
    expect(pathOf(() => new KernelSession({ python, slots: { jl: julia } }))).toEqual(['options.slots.jl.language']);
    expect(pathOf(() => new KernelSession({ python, slots: { python: julia } as never }))).toEqual([
      'options.slots.python',
    ]);
    expect(pathOf(() => new KernelSession({ python, r, slots: { r } }))).toEqual(['options.r']);
    expect(pathOf(() => new KernelSession({ python, slots: { julia }, slotEnvs: { ruby: 'x' } as never }))).toEqual([
      'options.slotEnvs.ruby',
    ]);
    expect(pathOf(() => new KernelSession({ python, slotEnvs: { r: 'b' } }))).toEqual(['options.slotEnvs.r']);
    expect(pathOf(() => new KernelSession({ python, slots: { julia: { language: 'julia' } as never } }))).toEqual([
      'options.slots.julia.ensure',
      'options.slots.julia.lease',
      'options.slots.julia.execute',
      'options.slots.julia.shutdown',
      'options.slots.julia.status',
    ]);
  });
});
