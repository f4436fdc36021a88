import { getEventListeners } from 'node:events';
import {
  abortCallbacks,
  type ExecuteOptions,
  type ExecuteResult,
  InvalidOptionsError,
  isTimeoutError,
} from '@kernelwarden/core';
import { KernelSupervisor, type Lease } from '@kernelwarden/supervisor';
import { okResult as baseResult, Gate, ManualClock, RecordingKernel } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import {
  CellTimeoutAbandonedError,
  CellTimeoutBootstrapFailedError,
  CellTimeoutError,
  CellTimeoutLeaseReplacedError,
  CellTimeoutRestartFailedError,
  createWatchdog,
  type WatchdogEvent,
  type WatchdogPolicy,
} from './index.js';

const BUDGET = 10_000;
const INTERRUPT_GRACE = 1_000;
const KILL_GRACE = 2_000;

function okResult(cellId: string, extra: Partial<ExecuteResult> = {}): ExecuteResult {
  return { ...baseResult(cellId), ...extra };
}

function interruptedResult(cellId: string): ExecuteResult {
  return okResult(cellId, {
    status: 'error',
    error: { ename: 'KeyboardInterrupt', evalue: '', traceback: [] },
  });
}

/** A cell that runs until the kernel is interrupted (`releaseOnInterrupt`), then reports KeyboardInterrupt. */
async function interruptible(_code: string, opts: ExecuteOptions, kernel: RecordingKernel): Promise<ExecuteResult> {
  await kernel.executeRelease.wait();
  return interruptedResult(opts.cellId ?? '');
}

/** A cell that ignores the interrupt and fails only when the kernel is killed under it. */
async function diesWhenKilled(_code: string, _opts: ExecuteOptions, kernel: RecordingKernel): Promise<ExecuteResult> {
  await kernel.executeRelease.wait();
  throw new Error('worker pipe closed');
}

/** A supervisor with one python kernel, a watchdog on a manual clock, and the rungs it emits. */
async function harness(
  kernelOptions: ConstructorParameters<typeof RecordingKernel>[1] = {},
  policy: WatchdogPolicy = {},
) {
  const clock = new ManualClock();
  const events: string[] = [];
  const supervisor = new KernelSupervisor<RecordingKernel>({ clock });
  const kernel = new RecordingKernel('python', { events, ...kernelOptions });
  const first = await supervisor.ensure('python', 'base', () => kernel);
  const watchdog = createWatchdog({
    cellTimeoutMs: BUDGET,
    interruptGraceMs: INTERRUPT_GRACE,
    killGraceMs: KILL_GRACE,
    clock,
    ...policy,
  });
  const rungs: WatchdogEvent[] = [];
  watchdog.on('*', (event) => rungs.push(event));
  const bootstrapped: Lease<RecordingKernel>[] = [];
  const bootstrap = async (lease: Lease<any>) => {
    bootstrapped.push(lease);
  };
  return { clock, events, supervisor, kernel, first, watchdog, rungs, bootstrapped, bootstrap };
}

/** Settles a promise into a value, so a rejection is never unhandled while the test drives the clock. */
function settle<T>(promise: Promise<T>): Promise<{ value?: T; error?: unknown }> {
  return promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
}

describe('createWatchdog: the cell itself', () => {
  it('passes the cell id to the kernel unchanged and returns it on the result', async () => {
    const h = await harness();
    const result = await h.watchdog.run({
      supervisor: h.supervisor,
      slot: 'python',
      code: "print('identified')",
      cellId: 'cell-shared',
      origin: 'agent',
    });
    expect(result.cellId).toBe('cell-shared');
    expect(h.kernel.executions).toHaveLength(1);
    expect(h.kernel.executions[0]?.code).toBe("print('identified')");
    expect(h.kernel.executions[0]?.opts.cellId).toBe('cell-shared');
    expect(h.kernel.executions[0]?.opts.origin).toBe('agent');
    expect(h.rungs).toEqual([]);
    expect(h.clock.pendingTimers()).toBe(0);
  });

  it('streams outputs to onOutput as the kernel produces them', async () => {
    const h = await harness({
      execute: (_code, opts) => {
        opts.onOutput?.({ type: 'stream', name: 'stdout', text: 'hi\n' });
        return okResult(opts.cellId, { stdout: 'hi\n' });
      },
    });
    const seen: unknown[] = [];
    const result = await h.watchdog.run({
      supervisor: h.supervisor,
      slot: 'python',
      code: "print('hi')",
      onOutput: (output) => seen.push(output),
    });
    expect(seen).toEqual([{ type: 'stream', name: 'stdout', text: 'hi\n' }]);
    expect(result.stdout).toBe('hi\n');
    expect(result.cellId).toBe(h.kernel.executions[0]?.opts.cellId);
  });

  it('rejects with the kernel’s own error when execute fails before the budget, without escalating', async () => {
    const broken = new Error('malformed frame');
    const h = await harness({
      execute: () => {
        throw broken;
      },
    });
    await expect(h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: 'x' })).rejects.toBe(broken);
    expect(h.rungs).toEqual([]);
    expect(h.kernel.interruptCalls).toBe(0);
    expect(h.clock.pendingTimers()).toBe(0);
  });

  it('runs on the lease given in the request rather than looking the slot up', async () => {
    const h = await harness();
    const other = new RecordingKernel('other');
    const lease: Lease<RecordingKernel> = { ...h.first, kernel: other };
    await h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: '1', lease });
    expect(other.executeCalls).toBe(1);
    expect(h.kernel.executeCalls).toBe(0);
  });
});

describe('createWatchdog: the ladder on timeout', () => {
  it('interrupts, kills and restarts a hung cell exactly once each, re-bootstraps, and rejects with cell exceeded', async () => {
    const h = await harness({ execute: diesWhenKilled });
    const outcome = settle(
      h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: 'hang()', bootstrap: h.bootstrap }),
    );
    await h.kernel.executeEntered.wait();
    await h.clock.advance(BUDGET);
    expect(h.kernel.interruptCalls).toBe(1);
    expect(h.kernel.killCalls).toBe(0);
    await h.clock.advance(INTERRUPT_GRACE);
    const { error } = await outcome;

    expect(isTimeoutError(error)).toBe(true);
    expect(CellTimeoutError.isInstance(error)).toBe(true);
    expect((error as CellTimeoutError).code).toBe('CELL_TIMEOUT');
    expect((error as Error).message).toMatch(/^cell exceeded 10s /);
    expect((error as Error).message).toContain('the kernel was reset');
    const recovered = h.supervisor.lease('python');
    expect(recovered?.kernel).toBe(h.kernel);
    expect(recovered?.generation).toBe(h.first.generation + 1);
    expect([h.kernel.interruptCalls, h.kernel.killCalls, h.kernel.restartCalls]).toEqual([1, 1, 1]);
    expect(h.bootstrapped.map((lease) => lease.kernel)).toEqual([h.kernel]);
    expect(h.bootstrapped[0]?.id).toBe(recovered?.id);
    expect(h.events).toEqual([
      'python:execute-enter',
      'python:interrupt',
      'python:kill',
      'python:execute-exit',
      'python:restart',
    ]);
    expect(h.rungs.map((r) => [r.type, r.leaseId, r.generation, r.acted, r.reason])).toEqual([
      ['interrupt', h.first.id, 0, true, 'timeout'],
      ['kill', h.first.id, 0, true, 'timeout'],
      ['restart', h.first.id, 0, true, 'timeout'],
      ['bootstrap', recovered?.id, 1, true, 'timeout'],
    ]);
    expect(h.rungs[2]?.replacement).toEqual({ leaseId: recovered?.id, generation: 1 });
    expect(h.clock.pendingTimers()).toBe(0);
  });

  it('publishes the next generation without a second restart when the kill already left a fresh interpreter', async () => {
    const h = await harness({ killRestarts: true, execute: diesWhenKilled });
    const outcome = settle(
      h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: 'hang()', bootstrap: h.bootstrap }),
    );
    await h.kernel.executeEntered.wait();
    await h.clock.advance(BUDGET);
    await h.clock.advance(INTERRUPT_GRACE);
    const { error } = await outcome;

    expect(CellTimeoutError.isInstance(error)).toBe(true);
    const recovered = h.supervisor.lease('python');
    expect(recovered?.kernel).toBe(h.kernel);
    expect(recovered?.generation).toBe(h.first.generation + 1);
    expect([h.kernel.interruptCalls, h.kernel.killCalls, h.kernel.restartCalls]).toEqual([1, 1, 0]);
    expect(h.kernel.isAlive()).toBe(true);
    expect(h.bootstrapped.map((lease) => lease.id)).toEqual([recovered?.id]);
    expect(h.rungs.map((r) => [r.type, r.generation, r.acted])).toEqual([
      ['interrupt', 0, true],
      ['kill', 0, true],
      ['restart', 0, true],
      ['bootstrap', 1, true],
    ]);
    expect(h.rungs[2]?.replacement).toEqual({ leaseId: recovered?.id, generation: 1 });
    expect(h.clock.pendingTimers()).toBe(0);
  });

  it('returns the interrupted result when the interrupt works: no kill, generation unchanged', async () => {
    const h = await harness({ execute: interruptible });
    h.kernel.releaseOnInterrupt = true;
    const outcome = settle(
      h.watchdog.run({
        supervisor: h.supervisor,
        slot: 'python',
        code: 'sleep()',
        cellId: 'c1',
        bootstrap: h.bootstrap,
      }),
    );
    await h.kernel.executeEntered.wait();
    await h.clock.advance(BUDGET);
    const { value } = await outcome;
    expect(value?.cellId).toBe('c1');
    expect(value?.error?.ename).toBe('KeyboardInterrupt');
    expect(value?.timedOut).toBe(true);
    expect(value?.cancelled).toBe(false);
    expect(h.kernel.killCalls).toBe(0);
    expect(h.kernel.restartCalls).toBe(0);
    expect(h.supervisor.lease('python')).toBe(h.first);
    expect(h.bootstrapped).toEqual([]);
    expect(h.rungs.map((r) => r.type)).toEqual(['interrupt']);
    expect(h.clock.pendingTimers()).toBe(0);
  });

  it('does not kill before the interrupt grace has passed', async () => {
    const h = await harness({ hold: true });
    const outcome = settle(h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: 'spin()' }));
    await h.kernel.executeEntered.wait();
    await h.clock.advance(BUDGET - 1);
    expect(h.kernel.interruptCalls).toBe(0);
    await h.clock.advance(1);
    expect(h.kernel.interruptCalls).toBe(1);
    await h.clock.advance(INTERRUPT_GRACE - 1);
    expect(h.kernel.killCalls).toBe(0);
    await h.clock.advance(1);
    expect(h.kernel.killCalls).toBe(1);
    expect(CellTimeoutError.isInstance((await outcome).error)).toBe(true);
  });

  it('still waits the interrupt grace when the interrupt was not delivered, and returns a cell that finished in it', async () => {
    const h = await harness({ hold: true });
    h.kernel.interrupt = async () => {
      h.kernel.interruptCalls += 1;
      return { delivered: false };
    };
    const outcome = settle(h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: 'finishing()' }));
    await h.kernel.executeEntered.wait();
    await h.clock.advance(BUDGET);
    expect(h.kernel.interruptCalls).toBe(1);
    await h.clock.advance(INTERRUPT_GRACE - 1);
    expect(h.kernel.killCalls).toBe(0);
    h.kernel.executeRelease.open();
    const { value, error } = await outcome;
    expect(error).toBeUndefined();
    expect(value?.status).toBe('ok');
    expect(value?.timedOut).toBe(true);
    expect(h.kernel.killCalls).toBe(0);
  });

  it('shuts the kernel down and rejects with the restart-failed variant when the restart fails', async () => {
    const h = await harness({ hold: true });
    h.kernel.restart = async () => {
      throw new Error('no free ports');
    };
    const outcome = settle(
      h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: 'spin()', bootstrap: h.bootstrap }),
    );
    await h.kernel.executeEntered.wait();
    await h.clock.advance(BUDGET + INTERRUPT_GRACE);
    const { error } = await outcome;
    expect(CellTimeoutRestartFailedError.isInstance(error)).toBe(true);
    expect(CellTimeoutError.isInstance(error)).toBe(true);
    expect(isTimeoutError(error)).toBe(true);
    expect((error as CellTimeoutError).code).toBe('CELL_TIMEOUT_RESTART_FAILED');
    expect((error as Error).message).toMatch(/^cell exceeded 10s .*could not be restarted and was shut down/);
    expect((error as Error).cause).toBeDefined();
    expect(h.supervisor.lease('python')).toBeUndefined();
    expect(h.kernel.shutdownCalls).toBe(1);
    expect(h.kernel.live).toBe(false);
    expect(h.bootstrapped).toEqual([]);
    expect(h.rungs.map((r) => [r.type, r.acted])).toEqual([
      ['interrupt', true],
      ['kill', true],
      ['restart', false],
    ]);
    expect(h.clock.pendingTimers()).toBe(0);
  });

  it('shuts the restarted kernel down and rejects with the bootstrap-failed variant when the bootstrap fails', async () => {
    const h = await harness({ hold: true });
    const failure = new Error('sidecar missing');
    const outcome = settle(
      h.watchdog.run({
        supervisor: h.supervisor,
        slot: 'python',
        code: 'spin()',
        bootstrap: async () => {
          throw failure;
        },
      }),
    );
    await h.kernel.executeEntered.wait();
    await h.clock.advance(BUDGET + INTERRUPT_GRACE);
    const { error } = await outcome;
    expect(CellTimeoutBootstrapFailedError.isInstance(error)).toBe(true);
    expect((error as CellTimeoutError).code).toBe('CELL_TIMEOUT_BOOTSTRAP_FAILED');
    expect((error as Error).message).toMatch(/^cell exceeded 10s .*bootstrap failed, so it was shut down/);
    expect((error as Error).cause).toBe(failure);
    expect(h.kernel.restartCalls).toBe(1);
    expect(h.kernel.shutdownCalls).toBe(1);
    expect(h.supervisor.lease('python')).toBeUndefined();
    expect(h.supervisor.status('python').endedReason).toBe('bootstrap_failed');
    expect(h.rungs.map((r) => [r.type, r.generation, r.acted])).toEqual([
      ['interrupt', 0, true],
      ['kill', 0, true],
      ['restart', 0, true],
      ['bootstrap', 1, false],
    ]);
    expect(h.clock.pendingTimers()).toBe(0);
  });

  it('abandons the lease (shut down, slot empty) when the cell is still stuck after the kill grace', async () => {
    const never = new Gate();
    const h = await harness({ execute: () => never.wait().then(() => okResult('never')) });
    const outcome = settle(
      h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: 'wedged()', bootstrap: h.bootstrap }),
    );
    await h.kernel.executeEntered.wait();
    await h.clock.advance(BUDGET + INTERRUPT_GRACE);
    expect(h.kernel.killCalls).toBe(1);
    await h.clock.advance(KILL_GRACE);
    const { error } = await outcome;
    expect(CellTimeoutAbandonedError.isInstance(error)).toBe(true);
    expect((error as CellTimeoutError).code).toBe('CELL_TIMEOUT_ABANDONED');
    expect((error as Error).message).toMatch(/^cell exceeded 10s /);
    expect(h.kernel.restartCalls).toBe(0);
    expect(h.kernel.shutdownCalls).toBe(1);
    expect(h.supervisor.lease('python')).toBeUndefined();
    expect(h.bootstrapped).toEqual([]);
    expect(h.rungs.map((r) => r.type)).toEqual(['interrupt', 'kill', 'abandon']);
    expect(h.clock.pendingTimers()).toBe(0);
    never.open();
  });
  it('bounds an interrupt request that hangs by the interrupt grace, then kills', async () => {
    const h = await harness({ hold: true });
    h.kernel.interrupt = () => new Promise(() => {});
    const outcome = settle(h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: 'spin()' }));
    await h.kernel.executeEntered.wait();
    await h.clock.advance(BUDGET + INTERRUPT_GRACE);
    expect(h.kernel.killCalls).toBe(1);
    expect(CellTimeoutError.isInstance((await outcome).error)).toBe(true);
    expect(h.rungs.map((r) => [r.type, r.acted])).toEqual([
      ['interrupt', false],
      ['kill', true],
      ['restart', true],
    ]);
  });

  it('waits for a slow kill once the cell has settled, then restarts the same lease', async () => {
    const killDone = new Gate();
    const h = await harness({ hold: true }, { killTimeoutMs: 30_000 });
    h.kernel.kill = async () => {
      h.kernel.killCalls++;
      h.kernel.executeRelease.open(); // the cell settles at once, like a gateway kernel's pending executions
      await killDone.wait(); // while the server-side restart takes its time
    };
    const outcome = settle(h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: 'spin()' }));
    await h.kernel.executeEntered.wait();
    await h.clock.advance(BUDGET + INTERRUPT_GRACE + KILL_GRACE * 5);
    expect(h.kernel.restartCalls).toBe(0);
    expect(h.kernel.shutdownCalls).toBe(0);
    killDone.open();
    const { error } = await outcome;
    expect((error as CellTimeoutError).code).toBe('CELL_TIMEOUT');
    expect(h.kernel.restartCalls).toBe(1);
    expect(h.supervisor.lease('python')?.generation).toBe(1);
    expect(h.clock.pendingTimers()).toBe(0);
  });

  it('abandons the lease when the kill does not return within killTimeoutMs, even though the cell settled', async () => {
    const h = await harness({ hold: true }, { killTimeoutMs: 30_000 });
    h.kernel.kill = async () => {
      h.kernel.executeRelease.open();
      await new Promise(() => {});
    };
    const outcome = settle(h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: 'spin()' }));
    await h.kernel.executeEntered.wait();
    await h.clock.advance(BUDGET + INTERRUPT_GRACE + 30_000 - 1);
    expect(h.kernel.shutdownCalls).toBe(0);
    await h.clock.advance(1);
    expect(CellTimeoutAbandonedError.isInstance((await outcome).error)).toBe(true);
    expect(h.kernel.restartCalls).toBe(0);
    expect(h.kernel.shutdownCalls).toBe(1);
    expect(h.supervisor.lease('python')).toBeUndefined();
    expect(h.clock.pendingTimers()).toBe(0);
  });

  it('abandons the lease when the kill neither returns nor settles the cell within the kill grace', async () => {
    const h = await harness({ hold: true });
    h.kernel.kill = () => new Promise(() => {});
    const outcome = settle(h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: 'spin()' }));
    await h.kernel.executeEntered.wait();
    await h.clock.advance(BUDGET + INTERRUPT_GRACE + KILL_GRACE);
    expect(CellTimeoutAbandonedError.isInstance((await outcome).error)).toBe(true);
    expect(h.kernel.restartCalls).toBe(0);
    expect(h.kernel.shutdownCalls).toBe(1);
    expect(h.supervisor.lease('python')).toBeUndefined();
    expect(h.rungs.map((r) => [r.type, r.acted])).toEqual([
      ['interrupt', true],
      ['kill', false],
      ['abandon', true],
    ]);
    expect(h.clock.pendingTimers()).toBe(0);
  });
});

describe('createWatchdog: a lease replaced while the cell ran', () => {
  /** A shutdown that leaves the running cell unsettled, as an unconfirmed DELETE to a wedged gateway would. */
  const keepCellRunning = async () => ({ confirmed: false });

  it('settles at once, without escalating, when the replaced kernel’s shutdown settles the cell', async () => {
    const h = await harness({ hold: true });
    const outcome = settle(h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: 'spin()' }));
    await h.kernel.executeEntered.wait();
    await h.supervisor.ensure('python', 'other-env', () => new RecordingKernel('newer'));
    const { value } = await outcome;
    expect(value?.status).toBe('aborted');
    expect(h.rungs).toEqual([]);
    expect(h.clock.pendingTimers()).toBe(0);
  });

  it('touches nothing newer than the lease the cell ran on', async () => {
    const never = new Gate();
    const h = await harness({ execute: () => never.wait().then(() => okResult('old')) });
    h.kernel.shutdown = keepCellRunning;
    const outcome = settle(
      h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: 'wedged()', bootstrap: h.bootstrap }),
    );
    await h.kernel.executeEntered.wait();
    const newer = new RecordingKernel('newer', { events: h.events });
    const replacement = await h.supervisor.ensure('python', 'other-env', () => newer);
    expect(replacement.generation).toBe(1);

    await h.clock.advance(BUDGET + INTERRUPT_GRACE + KILL_GRACE);
    const { error } = await outcome;
    expect(CellTimeoutLeaseReplacedError.isInstance(error)).toBe(true);
    expect((error as CellTimeoutError).code).toBe('CELL_TIMEOUT_LEASE_REPLACED');
    expect([newer.interruptCalls, newer.killCalls, newer.restartCalls, newer.shutdownCalls]).toEqual([0, 0, 0, 0]);
    expect([h.kernel.interruptCalls, h.kernel.killCalls, h.kernel.restartCalls]).toEqual([0, 0, 0]);
    expect(h.supervisor.lease('python')).toBe(replacement);
    expect(h.bootstrapped).toEqual([]);
    expect(h.rungs.map((r) => [r.type, r.acted])).toEqual([
      ['interrupt', false],
      ['kill', false],
      ['abandon', false],
    ]);
    expect(h.clock.pendingTimers()).toBe(0);
    never.open();
  });

  it('returns the cell’s own answer when it arrives after its lease was stopped', async () => {
    const h = await harness({ hold: true });
    h.kernel.shutdown = keepCellRunning;
    const outcome = settle(h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: 'spin()' }));
    await h.kernel.executeEntered.wait();
    await h.supervisor.stop('python');
    await h.clock.advance(BUDGET);
    h.kernel.executeRelease.open();
    await h.clock.advance(KILL_GRACE);
    const { value } = await outcome;
    expect(value?.timedOut).toBe(true);
    expect(h.kernel.killCalls).toBe(0);
    expect(h.kernel.restartCalls).toBe(0);
    expect(h.rungs.map((r) => [r.type, r.acted])).toEqual([
      ['interrupt', false],
      ['kill', false],
    ]);
  });
});

describe('createWatchdog: stdin, cancellation and a disabled budget', () => {
  it('does not count time spent waiting for the user’s stdin answer against the budget', async () => {
    const ask = new Gate();
    const answer = new Gate();
    const answers: string[] = [];
    const h = await harness({
      execute: async (_code, opts, kernel) => {
        await ask.wait();
        answers.push(await opts.onInput!({ prompt: 'name? ', password: false }));
        await kernel.executeRelease.wait();
        return interruptedResult(opts.cellId ?? '');
      },
    });
    h.kernel.releaseOnInterrupt = true;
    const outcome = settle(
      h.watchdog.run({
        supervisor: h.supervisor,
        slot: 'python',
        code: 'input()',
        onInput: async () => {
          await answer.wait();
          return 'ada';
        },
      }),
    );
    await h.kernel.executeEntered.wait();
    await h.clock.advance(4_000);
    ask.open();
    await h.clock.advance(60_000); // the user thinks for a minute
    expect(h.kernel.interruptCalls).toBe(0);
    answer.open();
    await h.clock.advance(BUDGET - 4_000 - 1);
    expect(answers).toEqual(['ada']);
    expect(h.kernel.interruptCalls).toBe(0);
    await h.clock.advance(1);
    expect(h.kernel.interruptCalls).toBe(1);
    expect((await outcome).value?.timedOut).toBe(true);
  });

  it('starts the ladder at once when the caller aborts, and returns the interrupted result with cancelled', async () => {
    const h = await harness({ execute: interruptible });
    h.kernel.releaseOnInterrupt = true;
    const controller = new AbortController();
    const outcome = settle(
      h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: 'sleep()', signal: controller.signal }),
    );
    await h.kernel.executeEntered.wait();
    controller.abort(new Error('user pressed stop'));
    const { value } = await outcome;
    expect(h.clock.now()).toBe(0);
    expect(value?.cancelled).toBe(true);
    expect(value?.timedOut).toBe(false);
    expect(h.rungs.map((r) => [r.type, r.reason])).toEqual([['interrupt', 'cancelled']]);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('cuts through a stdin wait when the caller aborts', async () => {
    const h = await harness({
      execute: async (_code, opts, kernel) => {
        const pending = opts.onInput!({ prompt: '> ', password: false });
        await kernel.executeRelease.wait();
        void pending;
        return interruptedResult(opts.cellId ?? '');
      },
    });
    h.kernel.releaseOnInterrupt = true;
    const controller = new AbortController();
    const outcome = settle(
      h.watchdog.run({
        supervisor: h.supervisor,
        slot: 'python',
        code: 'input()',
        signal: controller.signal,
        onInput: () => new Promise<string>(() => {}),
      }),
    );
    await h.kernel.executeEntered.wait();
    controller.abort();
    expect((await outcome).value?.cancelled).toBe(true);
    expect(h.kernel.interruptCalls).toBe(1);
  });

  it('rejects with the signal’s own reason when a cancelled cell needed the hard reset', async () => {
    const h = await harness({ hold: true });
    const controller = new AbortController();
    const reason = new Error('turn cancelled');
    const outcome = settle(
      h.watchdog.run({
        supervisor: h.supervisor,
        slot: 'python',
        code: 'spin()',
        signal: controller.signal,
        bootstrap: h.bootstrap,
      }),
    );
    await h.kernel.executeEntered.wait();
    controller.abort(reason);
    await h.clock.advance(INTERRUPT_GRACE);
    expect((await outcome).error).toBe(reason);
    expect([h.kernel.interruptCalls, h.kernel.killCalls, h.kernel.restartCalls]).toEqual([1, 1, 1]);
    expect(h.supervisor.lease('python')?.generation).toBe(1);
    expect(h.bootstrapped).toHaveLength(1);
    expect(h.rungs.every((r) => r.reason === 'cancelled')).toBe(true);
  });

  it('takes each step only once when the caller aborts during an escalation that a timeout started', async () => {
    const h = await harness({ hold: true });
    const controller = new AbortController();
    const outcome = settle(
      h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: 'spin()', signal: controller.signal }),
    );
    await h.kernel.executeEntered.wait();
    await h.clock.advance(BUDGET);
    controller.abort();
    await h.clock.advance(INTERRUPT_GRACE);
    const { error } = await outcome;
    expect(CellTimeoutError.isInstance(error)).toBe(true);
    expect([h.kernel.interruptCalls, h.kernel.killCalls, h.kernel.restartCalls]).toEqual([1, 1, 1]);
  });

  it('rejects at once with the reason of a signal that is already aborted, running nothing', async () => {
    const h = await harness();
    const reason = new Error('too late');
    await expect(
      h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: '1', signal: AbortSignal.abort(reason) }),
    ).rejects.toBe(reason);
    expect(h.kernel.executeCalls).toBe(0);
  });

  it('never escalates with a disabled budget, and leaves no timer behind', async () => {
    for (const cellTimeoutMs of [0, -1, Number.POSITIVE_INFINITY]) {
      const h = await harness({ hold: true }, { cellTimeoutMs });
      expect(h.watchdog.policy.cellTimeoutMs).toBeUndefined();
      const outcome = settle(h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: 'long()' }));
      await h.kernel.executeEntered.wait();
      expect(h.clock.pendingTimers()).toBe(0);
      await h.clock.advance(365 * 24 * 3600 * 1000);
      expect(h.kernel.interruptCalls).toBe(0);
      h.kernel.executeRelease.open();
      const { value } = await outcome;
      expect(value?.status).toBe('ok');
      expect(value?.timedOut).toBe(false);
      expect(h.rungs).toEqual([]);
    }
  });

  it('does not pile listeners on a long-lived signal over 10,000 cells', async () => {
    const h = await harness();
    const controller = new AbortController();
    for (let i = 0; i < 10_000; i++) {
      await h.watchdog.run({ supervisor: h.supervisor, slot: 'python', code: `${i}`, signal: controller.signal });
    }
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    expect(h.clock.pendingTimers()).toBe(0);
  });
});

describe('createWatchdog: many cells on one signal', () => {
  it('200 cells on 200 kernels share one abort listener per signal: no MaxListenersExceededWarning, none left after', async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const clock = new ManualClock();
      const supervisor = new KernelSupervisor<RecordingKernel>({ clock });
      const kernels: RecordingKernel[] = [];
      for (let i = 0; i < 200; i++) {
        const kernel = new RecordingKernel(`k${i}`, { hold: true });
        kernels.push(kernel);
        await supervisor.ensure(`slot${i}`, 'base', () => kernel);
      }
      const watchdog = createWatchdog({ cellTimeoutMs: BUDGET, clock });
      const caller = new AbortController();
      const stop = new AbortController();
      const running = kernels.map((_, i) =>
        watchdog.run({
          supervisor,
          slot: `slot${i}`,
          code: `${i}`,
          signal: caller.signal,
          stopSignal: stop.signal,
        }),
      );
      await expect.poll(() => abortCallbacks(caller.signal)).toBe(200);
      expect(abortCallbacks(stop.signal)).toBe(200);
      expect(getEventListeners(caller.signal, 'abort')).toHaveLength(1);
      expect(getEventListeners(stop.signal, 'abort')).toHaveLength(1);
      for (const kernel of kernels) kernel.executeRelease.open();
      const results = await Promise.all(running);
      expect(results.every((r) => r.status === 'ok' && !r.cancelled)).toBe(true);
      expect(getEventListeners(caller.signal, 'abort')).toHaveLength(0);
      expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);
      expect(abortCallbacks(caller.signal)).toBe(0);
      await new Promise((r) => setImmediate(r));
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('a caller abort still cancels every one of many cells sharing the signal', async () => {
    const clock = new ManualClock();
    const supervisor = new KernelSupervisor<RecordingKernel>({ clock });
    const kernels: RecordingKernel[] = [];
    for (let i = 0; i < 20; i++) {
      const kernel = new RecordingKernel(`k${i}`, { hold: true, releaseOnInterrupt: true });
      kernels.push(kernel);
      await supervisor.ensure(`slot${i}`, 'base', () => kernel);
    }
    const watchdog = createWatchdog({ cellTimeoutMs: BUDGET, clock });
    const caller = new AbortController();
    const running = kernels.map((_, i) =>
      settle(watchdog.run({ supervisor, slot: `slot${i}`, code: `${i}`, signal: caller.signal })),
    );
    await expect.poll(() => abortCallbacks(caller.signal)).toBe(20);
    caller.abort();
    const outcomes = await Promise.all(running);
    expect(outcomes.every((o) => o.value?.cancelled === true)).toBe(true);
    expect(getEventListeners(caller.signal, 'abort')).toHaveLength(0);
  });
});

describe('createWatchdog: policy', () => {
  it('names the bad field of an invalid policy', () => {
    const cases: [WatchdogPolicy, string][] = [
      [{ cellTimeoutMs: Number.NaN }, 'policy.cellTimeoutMs'],
      [{ cellTimeoutMs: '10' as unknown as number }, 'policy.cellTimeoutMs'],
      [{ interruptGraceMs: -1 }, 'policy.interruptGraceMs'],
      [{ killGraceMs: Number.POSITIVE_INFINITY }, 'policy.killGraceMs'],
      [{ killTimeoutMs: -5 }, 'policy.killTimeoutMs'],
      [{ clock: {} as never }, 'policy.clock'],
      [{ cellTimeout: 5 } as WatchdogPolicy, 'policy.cellTimeout'],
    ];
    for (const [policy, path] of cases) {
      let caught: unknown;
      try {
        createWatchdog(policy);
      } catch (error) {
        caught = error;
      }
      expect(InvalidOptionsError.isInstance(caught)).toBe(true);
      expect((caught as InvalidOptionsError).path).toBe(path);
      expect((caught as Error).message).toContain(path);
    }
  });

  it('applies the documented defaults', () => {
    const watchdog = createWatchdog({ cellTimeoutMs: 5_000 });
    expect(watchdog.policy.cellTimeoutMs).toBe(5_000);
    expect(watchdog.policy.interruptGraceMs).toBe(10_000);
    expect(watchdog.policy.killGraceMs).toBe(10_000);
  });
});
