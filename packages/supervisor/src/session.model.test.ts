/**
 * Model-based test of KernelSession + KernelSupervisor under random interleavings (issue 5, item 8).
 *
 * Every command is *issued* without awaiting it, one to three per step back to back; factories, bootstraps and executions can be held open by gates
 * and released by later commands, so stop/start/setEnv/execute/restart/shutdown/kernel deaths interleave freely.
 * After every step the microtask queue is drained and the invariants are checked.
 *
 * Replay a failure: fast-check prints `seed` and `path`; run
 *   KW_MODEL_SEED=<seed> KW_MODEL_PATH=<path> npx vitest run --project unit packages/supervisor/src/session.model.test.ts
 * (KW_MODEL_RUNS overrides the number of runs, 2000 by default).
 */
import { KernelwardenError } from '@kernelwarden/core';
import { Gate, RecordingKernel } from '@kernelwarden/testkit';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { plainExecutor } from './executor.js';
import type { Lease } from './lease.js';
import { KernelSession, type KernelStatusEvent } from './session.js';

type Mode = 'ok' | 'fail' | 'hold';

type Command =
  | { kind: 'execute' }
  | { kind: 'stop' }
  | { kind: 'start' }
  | { kind: 'setEnv'; env: 'a' | 'b' | 'c' }
  | { kind: 'interrupt' }
  | { kind: 'restartCurrent' }
  | { kind: 'shutdownCurrent' }
  | { kind: 'staleOp'; pick: number; op: 'interrupt' | 'kill' | 'restart' | 'shutdown' }
  | { kind: 'kernelDies' }
  | { kind: 'factoryMode'; mode: Mode }
  | { kind: 'bootstrapMode'; mode: Mode }
  | { kind: 'executeMode'; mode: 'ok' | 'hold' | 'stubborn' }
  | { kind: 'releaseBuilds'; ok: boolean }
  | { kind: 'releaseBootstraps' }
  | { kind: 'releaseExecutions' }
  | { kind: 'background' }
  | { kind: 'supervisorStop' }
  | { kind: 'restartMode'; mode: 'ok' | 'hold' }
  | { kind: 'releaseRestarts' };

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ kind: 'execute' } as const) },
  { weight: 3, arbitrary: fc.constant({ kind: 'stop' } as const) },
  { weight: 3, arbitrary: fc.constant({ kind: 'start' } as const) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('setEnv' as const), env: fc.constantFrom('a', 'b', 'c') }) },
  { weight: 2, arbitrary: fc.constant({ kind: 'interrupt' } as const) },
  { weight: 2, arbitrary: fc.constant({ kind: 'restartCurrent' } as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'shutdownCurrent' } as const) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('staleOp' as const),
      pick: fc.nat(),
      op: fc.constantFrom('interrupt', 'kill', 'restart', 'shutdown'),
    }),
  },
  { weight: 2, arbitrary: fc.constant({ kind: 'kernelDies' } as const) },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('factoryMode' as const), mode: fc.constantFrom('ok', 'fail', 'hold') }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('bootstrapMode' as const), mode: fc.constantFrom('ok', 'fail', 'hold') }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('executeMode' as const),
      mode: fc.constantFrom('ok', 'hold', 'stubborn'),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('releaseBuilds' as const), ok: fc.boolean() }) },
  { weight: 2, arbitrary: fc.constant({ kind: 'releaseBootstraps' } as const) },
  { weight: 2, arbitrary: fc.constant({ kind: 'releaseExecutions' } as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'background' } as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'supervisorStop' } as const) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('restartMode' as const), mode: fc.constantFrom('ok', 'hold') }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'releaseRestarts' } as const) },
);

/** Drains every pending promise callback: the code under test uses no timers here, only promises. */
async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
}

function waitOrAbort(gate: Gate, signal: AbortSignal | undefined): Promise<'released' | 'aborted'> {
  return gate.wait(signal).then(
    () => 'released' as const,
    () => 'aborted' as const,
  );
}

class World {
  factoryMode: Mode = 'ok';
  bootstrapMode: Mode = 'ok';
  /** 'hold': executions wait for a release or their abort; 'stubborn': the executor ignores aborts until released. */
  executeMode: 'ok' | 'hold' | 'stubborn' = 'ok';
  restartMode: 'ok' | 'hold' = 'ok';
  restartGate = new Gate();
  buildGate = new Gate();
  buildFails = false;
  bootstrapGate = new Gate();
  executeGate = new Gate();
  /** Kernels handed to the session by its factory (main and background). */
  readonly delivered: { kernel: RecordingKernel; purpose: string }[] = [];
  readonly leases: Lease<RecordingKernel>[] = [];
  /** Kernels bootstrapped before they are published (an environment switch's replacement), while that runs. */
  readonly preparing = new Set<RecordingKernel>();
  readonly events: KernelStatusEvent[] = [];
  readonly issued: Promise<unknown>[] = [];
  readonly failures: string[] = [];
  /** Each stop run (joined calls share one promise) and those that finished. */
  readonly stopRuns: Promise<void>[] = [];
  readonly stopsDone = new Set<Promise<void>>();
  lastGeneration = 0;
  readonly session: KernelSession<RecordingKernel>;
  #seq = 0;

  constructor() {
    this.session = new KernelSession<RecordingKernel>({
      env: 'a',
      python: async (ctx) => {
        const mode = this.factoryMode;
        if (mode === 'fail') throw new Error('factory failure');
        if (mode === 'hold') {
          const gate = this.buildGate;
          await gate.wait();
          if (this.buildFails) throw new Error('held factory failure');
        }
        const kernel = new RecordingKernel(`k${this.#seq++}`, {
          execute: async (_code, opts) => {
            const outcome =
              this.executeMode === 'hold' ? await waitOrAbort(this.executeGate, opts?.signal) : 'released';
            return {
              status: outcome === 'aborted' ? 'aborted' : 'ok',
              cellId: opts?.cellId ?? 'cell',
              stdout: '',
              stderr: '',
              outputs: [],
              cancelled: outcome === 'aborted',
              timedOut: false,
              stdinRequested: false,
              truncated: false,
            };
          },
        });
        const restart = kernel.restart.bind(kernel);
        kernel.restart = async (opts) => {
          if (this.restartMode === 'hold') await this.restartGate.wait();
          await restart(opts);
        };
        this.delivered.push({ kernel, purpose: ctx.purpose });
        return kernel;
      },
      executor: {
        run: async (req) => {
          if (this.executeMode === 'stubborn') await this.executeGate.wait();
          return plainExecutor.run(req);
        },
      },
      bootstrap: async (lease, ctx) => {
        const provisional = lease.generation === -1;
        if (provisional) this.preparing.add(lease.kernel);
        try {
          const mode = this.bootstrapMode;
          if (mode === 'fail') throw new Error('bootstrap failure');
          if (mode === 'hold' && (await waitOrAbort(this.bootstrapGate, ctx.signal)) === 'aborted') {
            throw ctx.signal.reason;
          }
        } finally {
          if (provisional) this.preparing.delete(lease.kernel);
        }
      },
    });
    this.session.on('kernel_status', (event) => this.events.push(event));
    this.session.supervisor.on('published', (e) => this.leases.push(e.lease));
    this.session.supervisor.on('restarted', (e) => this.leases.push(e.lease));
  }

  track(name: string, promise: Promise<unknown>): Promise<unknown> {
    const tracked = promise.catch((error: unknown) => {
      if (!KernelwardenError.isInstance(error)) this.failures.push(`${name} rejected with an untyped error: ${error}`);
    });
    this.issued.push(tracked);
    return tracked;
  }

  /** A supervisor operation that must never wait on a factory, restart or bootstrap. */
  mustNotWait(name: string, promise: Promise<unknown>): void {
    let settled = false;
    void promise.then(
      () => (settled = true),
      () => (settled = true),
    );
    this.issued.push(
      settle().then(() => {
        if (!settled) this.failures.push(`${name} waited on a factory, restart or bootstrap`);
      }),
    );
  }

  countEvents(status: string): number {
    return this.events.filter((e) => e.status === status).length;
  }

  issue(command: Command): void {
    const { session } = this;
    const sup = session.supervisor;
    switch (command.kind) {
      case 'execute':
        this.track('execute', session.execute('x = 1'));
        break;
      case 'stop': {
        const promise = session.stop();
        if (!this.stopRuns.includes(promise)) {
          this.stopRuns.push(promise);
          void promise.finally(() => this.stopsDone.add(promise)).catch(() => undefined);
        }
        this.track('stop', promise);
        break;
      }
      case 'start': {
        const stopsBefore = [...this.stopRuns];
        const started = session.start().then(() => {
          // A start issued after a stop never overtakes it: that stop finished, and `stopped` precedes `started`.
          if (stopsBefore.some((stop) => !this.stopsDone.has(stop))) {
            this.failures.push('start resolved before a stop issued ahead of it finished');
          }
          const order = this.events.map((e) => e.status);
          if (stopsBefore.length > 0 && order.lastIndexOf('stopped') > order.lastIndexOf('started')) {
            this.failures.push('a start issued after a stop resolved with stopped after its started');
          }
        });
        this.track('start', started);
        break;
      }
      case 'setEnv':
        this.track('setEnv', session.setEnv(command.env));
        break;
      case 'interrupt':
        this.mustNotWait('interrupt', sup.interrupt('python'));
        break;
      case 'restartCurrent': {
        const lease = sup.lease('python');
        // A restart waits for itself (it may be held); everything else must not wait for it.
        if (lease) this.track('restartIfCurrent', sup.restartIfCurrent(lease));
        break;
      }
      case 'shutdownCurrent': {
        const lease = sup.lease('python');
        if (lease) this.mustNotWait('shutdownIfCurrent', sup.shutdownIfCurrent(lease, 'desynchronized'));
        break;
      }
      case 'staleOp': {
        if (this.leases.length === 0) break;
        const lease = this.leases[command.pick % this.leases.length]!;
        if (sup.isCurrent(lease)) break;
        const current = sup.lease('python')?.kernel;
        const counters = () =>
          current && [current.interruptCalls, current.killCalls, current.restartCalls, current.shutdownCalls];
        const before = JSON.stringify(counters());
        const generation = sup.status('python').generation;
        const op =
          command.op === 'interrupt'
            ? sup.interruptIfCurrent(lease)
            : command.op === 'kill'
              ? sup.killIfCurrent(lease)
              : command.op === 'restart'
                ? sup.restartIfCurrent(lease)
                : sup.shutdownIfCurrent(lease, 'stale');
        // Kernel calls start synchronously, so a stale operation that acted would show here already.
        if (JSON.stringify(counters()) !== before) this.failures.push(`stale ${command.op} touched the current kernel`);
        if (sup.status('python').generation !== generation)
          this.failures.push(`stale ${command.op} changed the generation`);
        this.mustNotWait(`stale ${command.op}`, op);
        void op.then((answer) => {
          if (answer !== false && answer !== undefined) this.failures.push(`stale ${command.op} acted`);
        });
        break;
      }
      case 'kernelDies': {
        const lease = sup.lease('python');
        if (lease) lease.kernel.live = false;
        break;
      }
      case 'factoryMode':
        this.factoryMode = command.mode;
        break;
      case 'bootstrapMode':
        this.bootstrapMode = command.mode;
        break;
      case 'executeMode':
        this.executeMode = command.mode;
        break;
      case 'releaseBuilds': {
        this.buildFails = !command.ok;
        const gate = this.buildGate;
        this.buildGate = new Gate();
        gate.open();
        break;
      }
      case 'releaseBootstraps': {
        const gate = this.bootstrapGate;
        this.bootstrapGate = new Gate();
        gate.open();
        break;
      }
      case 'releaseExecutions': {
        const gate = this.executeGate;
        this.executeGate = new Gate();
        gate.open();
        break;
      }
      case 'supervisorStop':
        this.mustNotWait('supervisor.stop', sup.stop('python', { reason: 'manual_stop' }));
        break;
      case 'restartMode':
        this.restartMode = command.mode;
        break;
      case 'releaseRestarts': {
        const gate = this.restartGate;
        this.restartGate = new Gate();
        gate.open();
        break;
      }
      case 'background': {
        try {
          session.runBackground('bg()');
        } catch (error) {
          if (!KernelwardenError.isInstance(error)) this.failures.push(`runBackground threw ${error}`);
        }
        break;
      }
    }
  }

  check(step: string): void {
    const sup = this.session.supervisor;
    const current = sup.lease('python');
    // At most one live current kernel per slot: every delivered main kernel is current or was shut down once.
    const mains = this.delivered.filter((d) => d.purpose === 'main').map((d) => d.kernel);
    for (const kernel of mains) {
      if (kernel.shutdownCalls > 1) this.failures.push(`${step}: ${kernel.id} shut down ${kernel.shutdownCalls} times`);
      if (kernel !== current?.kernel && kernel.shutdownCalls !== 1 && !this.preparing.has(kernel)) {
        this.failures.push(`${step}: ${kernel.id} is neither current nor shut down`);
      }
    }
    if (current && current.kernel.shutdownCalls !== 0) this.failures.push(`${step}: the current kernel was shut down`);
    const live = mains.filter((k) => k.live && k.shutdownCalls === 0 && !this.preparing.has(k));
    if (live.length > 1) this.failures.push(`${step}: ${live.length} live kernels in the python slot`);
    // Generations never go down.
    const generation = sup.status('python').generation;
    this.session.status(); // answers synchronously whatever is held
    if (generation < this.lastGeneration)
      this.failures.push(`${step}: generation went from ${this.lastGeneration} to ${generation}`);
    this.lastGeneration = generation;
    if (current && current.generation !== generation)
      this.failures.push(`${step}: lease generation differs from status`);
    for (let i = 1; i < this.leases.length; i++) {
      if (this.leases[i]!.generation <= this.leases[i - 1]!.generation)
        this.failures.push(`${step}: generations not increasing`);
    }
  }

  async finish(): Promise<void> {
    this.factoryMode = 'ok';
    this.bootstrapMode = 'ok';
    this.executeMode = 'ok';
    this.restartMode = 'ok';
    this.restartGate.open();
    this.buildGate.open();
    this.bootstrapGate.open();
    this.executeGate.open();
    await this.session.close();
    await Promise.all(this.issued);
    for (const { kernel, purpose } of this.delivered) {
      if (kernel.shutdownCalls !== 1)
        this.failures.push(`after close: ${purpose} ${kernel.id} shut down ${kernel.shutdownCalls} times`);
    }
    if (this.events.at(-1)?.status !== 'ended') this.failures.push('close did not emit ended last');
  }
}

describe('KernelSession model (fast-check)', () => {
  it('keeps its invariants under random interleavings of lifecycle operations, deaths and failures', async () => {
    const runs = Number(process.env.KW_MODEL_RUNS ?? 2000);
    const seed = process.env.KW_MODEL_SEED === undefined ? undefined : Number(process.env.KW_MODEL_SEED);
    const path = process.env.KW_MODEL_PATH;
    let executed = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(commandArb, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 16 }),
        async (steps) => {
          executed++;
          const world = new World();
          for (const [i, group] of steps.entries()) {
            // The commands of one step are issued back to back, without letting anything settle in between.
            for (const command of group) world.issue(command);
            await settle();
            world.check(`step ${i} (${group.map((c) => c.kind).join(', ')})`);
            if (world.failures.length > 0) break;
          }
          await world.finish();
          expect(world.failures).toEqual([]);
        },
      ),
      { numRuns: runs, ...(seed !== undefined ? { seed } : {}), ...(path !== undefined ? { path } : {}) },
    );
    if (path === undefined) expect(executed).toBe(runs);
  }, 600_000);
});
