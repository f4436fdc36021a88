import { getEventListeners } from 'node:events';
import type { ExecuteOptions, ExecuteResult } from '@kernelwarden/core';
import { GatewayDownError } from '@kernelwarden/gateway-client';
import { createRSlot } from '@kernelwarden/r-kernel';
import { createLanguageSlot, KernelSession } from '@kernelwarden/supervisor';
import { ManualClock, okResult, RecordingKernel } from '@kernelwarden/testkit';
import { createWatchdog } from '@kernelwarden/watchdog';
import { afterEach, describe, expect, it } from 'vitest';
import type { KernelToolResult } from './cell-transcript.js';
import { KernelTools } from './kernel-tools.js';
import { resolveKernelToolOptions } from './tool-options.js';

/** A fake Python: `x = V` sets x, `x` prints it, `spin` ignores interrupts, `sleep` stops on interrupt. */
async function script(code: string, opts: ExecuteOptions & { cellId: string }, k: RecordingKernel) {
  const print = (text: string) => opts.onOutput?.({ type: 'stream', name: 'stdout', text });
  const result: ExecuteResult = okResult(opts.cellId);
  if (code.startsWith('x = ')) k.state.set('x', code.slice(4));
  else if (code === 'x') {
    if (!k.state.has('x')) {
      const error = { ename: 'NameError', evalue: "name 'x' is not defined", traceback: [] };
      opts.onOutput?.({ type: 'error', ...error });
      return { ...result, status: 'error' as const, error };
    }
    print(`${k.state.get('x')}\n`);
  } else if (code === 'gateway down') {
    print('started\n');
    k.live = false;
    throw new GatewayDownError('Gateway http://127.0.0.1:8888 stopped answering; kernel k on it is lost', {
      url: 'http://127.0.0.1:8888',
      kernelId: 'k',
    });
  } else if (code === 'spin' || code === 'sleep') {
    print('started\n');
    await k.executeRelease.wait();
    const error = { ename: 'KeyboardInterrupt', evalue: '', traceback: [] };
    opts.onOutput?.({ type: 'error', ...error });
    return { ...result, status: 'error' as const, error };
  }
  return result;
}

const open: KernelSession[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

function setup(opts: { r?: boolean } = {}) {
  const clock = new ManualClock();
  const kernels: RecordingKernel[] = [];
  const session = new KernelSession({
    python: () => {
      const kernel = new RecordingKernel('python', { execute: script });
      kernels.push(kernel);
      return kernel;
    },
    ...(opts.r
      ? {
          r: createRSlot({
            spawn: () => {
              throw new Error('no ir kernelspec');
            },
          }),
        }
      : {}),
    executor: createWatchdog({ cellTimeoutMs: 0, interruptGraceMs: 1_000, killGraceMs: 1_000, clock }),
  });
  open.push(session);
  const tools = new KernelTools(session, resolveKernelToolOptions({ clock }));
  return { clock, kernels, session, tools };
}

const textOf = (result: KernelToolResult) =>
  result.content.map((c) => (c.type === 'text' ? c.text : `[${c.mimeType}]`)).join('\n');

/** Advances the clock until `promise` settles (the ladder's steps each wait for a timer). */
async function settle<T>(clock: ManualClock, promise: Promise<T>): Promise<T> {
  let done = false;
  void promise.finally(() => {
    done = true;
  });
  for (let i = 0; i < 50 && !done; i++) await clock.advance(500);
  return promise;
}

describe('KernelTools.runCode', () => {
  it('keeps state across calls and returns the output as text', async () => {
    const { tools } = setup();
    expect(await tools.runCode({ code: 'x = 41' })).toEqual({
      content: [{ type: 'text', text: '(no output)' }],
      isError: false,
    });
    const got = await tools.runCode({ code: 'x' });
    expect(got).toEqual({ content: [{ type: 'text', text: '41\n' }], isError: false });
  });

  it('reports an interrupted timeout as an error that kept the variables', async () => {
    const { clock, kernels, tools } = setup();
    await tools.runCode({ code: 'x = 1' });
    kernels[0]!.releaseOnInterrupt = true;
    const result = await settle(clock, tools.runCode({ code: 'sleep', timeout_seconds: 2 }));
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain('started\nKeyboardInterrupt');
    expect(textOf(result)).toMatch(/ran past its 2s timeout and was interrupted; the Python kernel kept its variables/);
    expect([kernels[0]!.interruptCalls, kernels[0]!.killCalls]).toEqual([1, 0]);
    expect(textOf(await tools.runCode({ code: 'x' }))).toBe('1\n');
    expect(clock.pendingTimers()).toBe(0);
  });

  it('says plainly that the kernel was restarted when the cell ignored the interrupt, and only once', async () => {
    const { clock, kernels, tools } = setup();
    await tools.runCode({ code: 'x = 1' });
    const result = await settle(clock, tools.runCode({ code: 'spin', timeout_seconds: 2 }));
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(
      /ran past its 2s timeout and did not stop when interrupted, so the Python kernel was restarted: variables from earlier calls are gone/,
    );
    expect([kernels[0]!.interruptCalls, kernels[0]!.killCalls, kernels[0]!.restartCalls]).toEqual([1, 1, 1]);
    const next = await tools.runCode({ code: 'x' });
    expect(next.isError).toBe(true);
    expect(textOf(next)).toBe("NameError: name 'x' is not defined\n");
  });

  it('says a queued cell was stopped by the session, not that it timed out, when the session stops', async () => {
    const { clock, kernels, session, tools } = setup();
    await tools.runCode({ code: 'x = 1' });
    kernels[0]!.releaseOnInterrupt = true;
    const running = tools.runCode({ code: 'sleep', max_wait_seconds: 0 });
    await kernels[0]!.executeEntered.wait();
    const queued = tools.runCode({ code: 'x', max_wait_seconds: 0 });
    const stopped = session.stop();
    await settle(clock, running);
    const result = await settle(clock, queued);
    await stopped;
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain('was stopped by the session (a kernel restart, or the server shutting down)');
    expect(textOf(result)).not.toContain('timeout');
  });

  it('cancel_cell on a yielded cell that ignores the interrupt climbs the ladder: killed, restarted, and said so', async () => {
    const { clock, kernels, tools } = setup();
    await tools.runCode({ code: 'x = 1' });
    const yielded = await settle(clock, tools.runCode({ code: 'spin', max_wait_seconds: 5 }));
    const id = yielded.structuredContent?.exec_id;
    expect(id).toMatch(/^cell-/);
    expect(textOf(yielded)).toMatch(/^started\n/);
    expect(kernels[0]!.interruptCalls).toBe(0);
    const cancelled = await settle(clock, tools.cancelCell(id!));
    expect(cancelled.isError).toBe(true);
    expect(textOf(cancelled)).toMatch(
      /was cancelled by the client and did not stop when interrupted, so the Python kernel was restarted: variables from earlier calls are gone/,
    );
    expect([kernels[0]!.interruptCalls, kernels[0]!.killCalls, kernels[0]!.restartCalls]).toEqual([1, 1, 1]);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('uses the default timeout when the call gives none, and none for 0 or past what a timer can wait', async () => {
    const clock = new ManualClock();
    const kernel = new RecordingKernel('python', { execute: script, releaseOnInterrupt: true });
    const session = new KernelSession({
      python: () => kernel,
      executor: createWatchdog({ cellTimeoutMs: 0, clock }),
    });
    open.push(session);
    const tools = new KernelTools(session, resolveKernelToolOptions({ clock, defaultTimeoutMs: 5_000 }));
    const timed = await settle(clock, tools.runCode({ code: 'sleep' }));
    expect(textOf(timed)).toMatch(/ran past its 5s timeout/);
    for (const timeout_seconds of [0, 1e12]) {
      kernel.executeRelease.reset();
      const unbounded = tools.runCode({ code: 'sleep', timeout_seconds });
      await clock.advance(60_000);
      expect(clock.pendingTimers()).toBe(0);
      expect(kernel.interruptCalls).toBe(1);
      kernel.executeRelease.open();
      expect(textOf(await unbounded)).not.toMatch(/timeout/);
    }
  });

  it('tells the model when the kernel died between calls, on the next call', async () => {
    const { kernels, tools } = setup();
    await tools.runCode({ code: 'x = 1' });
    kernels[0]!.live = false;
    const result = await tools.runCode({ code: 'x = 2' });
    expect(result.isError).toBe(false);
    expect(textOf(result)).toMatch(
      /the Python kernel was restarted since the last call .* variables from earlier calls are gone/,
    );
    expect(textOf(await tools.runCode({ code: 'x' }))).toBe('2\n');
  });

  it('says when the gateway went down under the cell, naming it, and that no restart was attempted', async () => {
    const { kernels, tools } = setup();
    await tools.runCode({ code: 'x = 1' });
    const result = await tools.runCode({ code: 'gateway down' });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain('started\n');
    expect(textOf(result)).toContain(
      'The gateway http://127.0.0.1:8888 went down while the Python cell ran (it stopped answering), so the Python kernel on it was lost. No restart was attempted: the next call starts a new Python kernel',
    );
    expect(kernels).toHaveLength(1);
    // The next call runs on a new kernel, without telling the model of the reset a second time.
    const next = await tools.runCode({ code: 'x' });
    expect(kernels).toHaveLength(2);
    expect(textOf(next)).toMatch(/name 'x' is not defined/);
    expect(textOf(next)).not.toMatch(/restarted since the last call/);
  });

  it('interrupts the cell when the caller aborts, and keeps the variables', async () => {
    const { kernels, tools } = setup();
    await tools.runCode({ code: 'x = 3' });
    kernels[0]!.releaseOnInterrupt = true;
    const caller = new AbortController();
    const running = tools.runCode({ code: 'sleep' }, { signal: caller.signal });
    await kernels[0]!.executeEntered.wait();
    caller.abort(new Error('client cancelled'));
    const result = await running;
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(
      /was cancelled by the client and was interrupted; the Python kernel kept its variables/,
    );
    expect(textOf(await tools.runCode({ code: 'x' }))).toBe('3\n');
  });

  it('answers an R cell with a clear error when R cannot start, and Python is unaffected', async () => {
    const { tools } = setup({ r: true });
    await tools.runCode({ code: 'x = 5' });
    const r = await tools.runCode({ code: 'cat(1)', language: 'r' });
    expect(r.isError).toBe(true);
    expect(textOf(r)).toMatch(/R kernel unavailable: .*no ir kernelspec/);
    expect(textOf(r)).toContain('Python cells are not affected');
    expect(textOf(await tools.runCode({ code: 'x' }))).toBe('5\n');
  });

  it('leaves no listener on a long-lived caller signal and no timer after 10,000 calls', async () => {
    const { clock, tools } = setup();
    const caller = new AbortController();
    for (let i = 0; i < 10_000; i++) {
      await tools.runCode({ code: 'x = 1', timeout_seconds: 30 }, { signal: caller.signal, onProgress: () => {} });
    }
    expect(getEventListeners(caller.signal, 'abort')).toHaveLength(0);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('recognises an unavailable R kernel by its marker, not by the name of its error', async () => {
    const session = new KernelSession({
      python: () => new RecordingKernel('py', { execute: (code, opts, k) => script(code, opts, k) }),
      slots: {
        r: createLanguageSlot({
          language: 'r',
          unavailableName: 'NoR',
          spawn: () => {
            throw new Error('R is missing');
          },
        }),
      },
    });
    open.push(session);
    const tools = new KernelTools(session, resolveKernelToolOptions());
    const r = await tools.runCode({ code: 'cat(1)', language: 'r' });
    expect(r.isError).toBe(true);
    expect(textOf(r)).toContain('NoR: R kernel unavailable: R is missing');
    expect(textOf(r)).toContain('Python cells are not affected');
    // An R error of its own is the cell's error, with no such note.
    const failing = new KernelSession({
      python: () => new RecordingKernel('py'),
      r: createLanguageSlot({
        language: 'r',
        spawn: () =>
          new RecordingKernel('r', {
            execute: (_code, opts) => {
              const error = { ename: 'RKernelUnavailable', evalue: 'a user condition', traceback: [] };
              return {
                ...okResult(opts.cellId),
                status: 'error' as const,
                error,
                outputs: [{ type: 'error', ...error }],
              };
            },
          }),
      }),
    });
    open.push(failing);
    const own = await new KernelTools(failing, resolveKernelToolOptions()).runCode({ code: 'stop()', language: 'r' });
    expect(own.isError).toBe(true);
    expect(textOf(own)).not.toContain('Python cells are not affected');
  });

  it('answers an R cell on a session without R with an error that says so', async () => {
    const { tools } = setup();
    const r = await tools.runCode({ code: 'cat(1)', language: 'r' });
    expect(r).toEqual({ content: [{ type: 'text', text: 'This server has no R kernel.' }], isError: true });
  });
});

describe('KernelTools.restart and background cells', () => {
  it('restarts the Python kernel, and the next call carries no stale reset note', async () => {
    const { kernels, tools } = setup();
    await tools.runCode({ code: 'x = 1' });
    const restarted = await tools.restart('python');
    expect(restarted).toEqual({
      content: [{ type: 'text', text: 'The Python kernel was restarted: its variables are gone.' }],
      isError: false,
    });
    expect(kernels[0]!.restartCalls).toBe(1);
    expect(textOf(await tools.runCode({ code: 'x' }))).toBe("NameError: name 'x' is not defined\n");
  });

  it('says the R kernel was not running when there is none to restart', async () => {
    const { tools } = setup({ r: true });
    expect(textOf(await tools.restart('r'))).toMatch(/R kernel was not running/);
  });

  it('starts a background cell and reports its output once done', async () => {
    const { tools } = setup();
    const started = await tools.startBackground('x = 9');
    const execId = /exec-[0-9a-f]+/.exec(textOf(started))?.[0];
    expect(execId).toBeDefined();
    const checked = await tools.checkBackground(execId!, 5);
    expect(checked.isError).toBe(false);
    expect(textOf(checked)).toMatch(new RegExp(`Background cell ${execId} finished`));
  });

  it('answers an unknown background id with an error', async () => {
    const { tools } = setup();
    const checked = await tools.checkBackground('exec-nope');
    expect(checked.isError).toBe(true);
    expect(textOf(checked)).toMatch(/No background cell/);
  });
});
