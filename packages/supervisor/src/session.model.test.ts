/**
 * Model-based test of KernelSession + KernelSupervisor under random interleavings.
 *
 * Every command is *issued* without awaiting it, one to three per step back to back: start, stop, execute, setEnv,
 * restart, runBackground and interrupt, with factories and bootstraps that fail, are delayed by a few event-loop
 * turns, or are held open by gates that later commands release; the factory may also hand out a handle it handed
 * out before (revived). Kernel deaths and direct supervisor operations interleave too. After every step the
 * microtask queue is drained and the invariants are checked:
 *
 * - the last intent wins: when a stop() resolves the session is stopped, and nothing issued before that stop (no
 *   cell, no kernel build, no bootstrap) runs afterwards;
 * - a switch that fails (build or bootstrap) leaves the previous kernel, its environment and generation working;
 * - every kernel the factory handed over is shut down exactly once per hand-over by the end (and at most once while
 *   the run goes on; the current one, and a switch's replacement under bootstrap, not at all);
 * - generations never go down; stale exact-lease operations touch nothing; supervisor reads never wait.
 *
 * Replay a failure: fast-check prints `seed` and `path`; run
 *   KW_MODEL_SEED=<seed> KW_MODEL_PATH=<path> npx vitest run --project unit packages/supervisor/src/session.model.test.ts
 * (KW_MODEL_RUNS overrides the number of runs, 5000 by default).
 */
import { KernelwardenError } from '@kernelwarden/core';
import { Gate, RecordingKernel } from '@kernelwarden/testkit';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { plainExecutor } from './executor.js';
import type { Lease } from './lease.js';
import { KernelSession } from './session.js';
import type { KernelStatusEvent } from './session-status.js';

type FactoryMode = 'ok' | 'fail' | 'hold' | 'delay' | 'recycle';
type BootstrapMode = 'ok' | 'fail' | 'hold' | 'delay';

type Command =
  | { kind: 'execute' }
  | { kind: 'stop' }
  | { kind: 'start' }
  | { kind: 'setEnv'; env: 'a' | 'b' | 'c' }
  | { kind: 'restart' }
  | { kind: 'interrupt' }
  | { kind: 'restartCurrent' }
  | { kind: 'shutdownCurrent' }
  | { kind: 'staleOp'; pick: number; op: 'interrupt' | 'kill' | 'restart' | 'shutdown' }
  | { kind: 'kernelDies' }
  | { kind: 'factoryMode'; mode: FactoryMode; ticks: number }
  | { kind: 'bootstrapMode'; mode: BootstrapMode; ticks: number }
  | { kind: 'executeMode'; mode: 'ok' | 'hold' | 'stubborn' }
  | { kind: 'releaseBuilds'; ok: boolean }
  | { kind: 'releaseBootstraps' }
  | { kind: 'releaseExecutions' }
  | { kind: 'background' }
  | { kind: 'supervisorStop' }
  | { kind: 'restartMode'; mode: 'ok' | 'hold' }
  | { kind: 'releaseRestarts' };

const ticksArb = fc.integer({ min: 1, max: 6 });

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ kind: 'execute' } as const) },
  { weight: 4, arbitrary: fc.constant({ kind: 'stop' } as const) },
  { weight: 3, arbitrary: fc.constant({ kind: 'start' } as const) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('setEnv' as const), env: fc.constantFrom('a', 'b', 'c') }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'restart' } as const) },
  { weight: 2, arbitrary: fc.constant({ kind: 'interrupt' } as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'restartCurrent' } as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'shutdownCurrent' } as const) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('staleOp' as const),
      pick: fc.nat(),
      op: fc.constantFrom('interrupt', 'kill', 'restart', 'shutdown'),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'kernelDies' } as const) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('factoryMode' as const),
      mode: fc.constantFrom<FactoryMode>('ok', 'fail', 'hold', 'delay', 'recycle'),
      ticks: ticksArb,
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('bootstrapMode' as const),
      mode: fc.constantFrom<BootstrapMode>('ok', 'fail', 'hold', 'delay'),
      ticks: ticksArb,
    }),
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

/** One turn of the event loop: delays are counted in these, so a run is the same on every machine. */
function tick(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Drains every pending promise callback: the code under test uses no timers here, only promises. */
async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) await tick();
}

async function delay(ticks: number): Promise<void> {
  for (let i = 0; i < ticks; i++) await tick();
}

function waitOrAbort(gate: Gate, signal: AbortSignal | undefined): Promise<'released' | 'aborted'> {
  return gate.wait(signal).then(
    () => 'released' as const,
    () => 'aborted' as const,
  );
}

/** The kernel a switch built on, seen when the switch's factory was called. */
interface SwitchBase {
  lease: Lease<RecordingKernel> | undefined;
  env: string | undefined;
  chaos: number;
  /** `env_changed` events so far: a failed switch adds none. */
  envChanged: number;
  built?: RecordingKernel;
}

class World {
  factoryMode: FactoryMode = 'ok';
  factoryTicks = 1;
  bootstrapMode: BootstrapMode = 'ok';
  bootstrapTicks = 1;
  /** 'hold': executions wait for a release or their abort; 'stubborn': the executor ignores aborts until released. */
  executeMode: 'ok' | 'hold' | 'stubborn' = 'ok';
  restartMode: 'ok' | 'hold' = 'ok';
  restartGate = new Gate();
  buildGate = new Gate();
  buildFails = false;
  bootstrapGate = new Gate();
  executeGate = new Gate();
  /** How many times the factory handed each kernel over (a recycled handle more than once), and for what. */
  readonly handOvers = new Map<RecordingKernel, { count: number; purpose: string }>();
  readonly leases: Lease<RecordingKernel>[] = [];
  /** Kernels bootstrapped before they are published (an environment switch's replacement), while that runs. */
  readonly preparing = new Set<RecordingKernel>();
  readonly events: KernelStatusEvent[] = [];
  readonly issued: Promise<unknown>[] = [];
  readonly failures: string[] = [];
  /** Each stop run (joined calls share one promise) and those that finished. */
  readonly stopRuns: Promise<void>[] = [];
  readonly stopsDone = new Set<Promise<void>>();
  /** Sequence numbers of the session commands (cells, start, setEnv, restart) not settled yet. */
  readonly outstanding = new Set<number>();
  /** The sequence number of the latest-issued stop() that has resolved: nothing issued before it may run now. */
  stopFence = -1;
  /** Incremented by every operation that changes the python slot behind the session's back. */
  chaos = 0;
  lastSwitchBase: SwitchBase | undefined;
  lastGeneration = 0;
  readonly session: KernelSession<RecordingKernel>;
  #seq = 0;
  #kernels = 0;

  constructor() {
    this.session = new KernelSession<RecordingKernel>({
      env: 'a',
      python: async (ctx) => {
        const main = ctx.purpose === 'main';
        let base: SwitchBase | undefined;
        if (main) {
          this.mustBeWanted('a kernel build');
          const lease = this.session.supervisor.lease('python');
          base = {
            lease,
            env: this.session.status().env,
            chaos: this.chaos,
            envChanged: this.countEvents('env_changed'),
          };
          this.lastSwitchBase = base;
        }
        const mode = this.factoryMode;
        if (mode === 'fail') throw new Error('factory failure');
        if (mode === 'delay') await delay(this.factoryTicks);
        if (mode === 'hold') {
          const gate = this.buildGate;
          await gate.wait();
          if (this.buildFails) throw new Error('held factory failure');
        }
        const kernel = (main && mode === 'recycle' && this.recyclable()) || this.newKernel();
        kernel.live = true;
        const record = this.handOvers.get(kernel);
        this.handOvers.set(kernel, { count: (record?.count ?? 0) + 1, purpose: ctx.purpose });
        if (base) base.built = kernel;
        return kernel;
      },
      executor: {
        run: async (req) => {
          this.mustBeIssuedAfterFence('executor.run', req.cellId);
          if (this.executeMode === 'stubborn') await this.executeGate.wait();
          return plainExecutor.run(req);
        },
      },
      bootstrap: async (lease, ctx) => {
        this.mustBeWanted('a bootstrap');
        const provisional = lease.generation === -1;
        if (provisional) this.preparing.add(lease.kernel);
        try {
          const mode = this.bootstrapMode;
          if (mode === 'fail') throw new Error('bootstrap failure');
          if (mode === 'delay') await delay(this.bootstrapTicks);
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

  newKernel(): RecordingKernel {
    const kernel = new RecordingKernel(`k${this.#kernels++}`, {
      execute: async (_code, opts) => {
        this.mustBeIssuedAfterFence('kernel.execute', opts.cellId);
        const outcome = this.executeMode === 'hold' ? await waitOrAbort(this.executeGate, opts?.signal) : 'released';
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
    return kernel;
  }

  /** A main kernel that was shut down for every time it was handed over, and is not in use: hand it out again. */
  recyclable(): RecordingKernel | undefined {
    const current = this.session.supervisor.lease('python')?.kernel;
    for (const [kernel, { count, purpose }] of this.handOvers) {
      if (purpose !== 'main' || kernel === current || this.preparing.has(kernel)) continue;
      if (kernel.shutdownCalls === count) return kernel;
    }
    return undefined;
  }

  /** Work for the session's slot may start only for a command issued after the last resolved stop. */
  mustBeWanted(what: string): void {
    if (![...this.outstanding].some((seq) => seq > this.stopFence)) {
      this.failures.push(`${what} started after stop #${this.stopFence} resolved, for nothing issued after it`);
    }
  }

  mustBeIssuedAfterFence(what: string, cellId: string | undefined): void {
    const seq = Number(cellId?.replace(/^model-seq-/, ''));
    if (Number.isInteger(seq) && seq < this.stopFence) {
      this.failures.push(`${what} ran cell #${seq} after stop #${this.stopFence} (issued after it) resolved`);
    }
  }

  /** Tracks a session command: it must settle with a kernelwarden error at worst. */
  track(name: string, seq: number, promise: Promise<unknown>): Promise<unknown> {
    this.outstanding.add(seq);
    const tracked = promise
      .catch((error: unknown) => {
        if (!KernelwardenError.isInstance(error))
          this.failures.push(`${name} rejected with an untyped error: ${error}`);
      })
      .finally(() => this.outstanding.delete(seq));
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

  issue(command: Command): void {
    const { session } = this;
    const sup = session.supervisor;
    const seq = this.#seq++;
    switch (command.kind) {
      case 'execute':
        this.track('execute', seq, session.execute('x = 1', { cellId: `model-seq-${seq}` }));
        break;
      case 'stop': {
        const promise = session.stop();
        if (!this.stopRuns.includes(promise)) {
          this.stopRuns.push(promise);
          void promise.finally(() => this.stopsDone.add(promise)).catch(() => undefined);
        }
        this.issued.push(
          promise.then(
            () => {
              // The last intent won: the session is stopped, and from now on nothing issued before may run.
              this.stopFence = Math.max(this.stopFence, seq);
              const status = session.status();
              if (status.state === 'running' || status.alive || !status.cancelled) {
                this.failures.push(
                  `stop #${seq} resolved with the session ${status.state}, cancelled ${status.cancelled}`,
                );
              }
            },
            (error: unknown) => this.failures.push(`stop #${seq} rejected: ${error}`),
          ),
        );
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
        this.track('start', seq, started);
        break;
      }
      case 'setEnv': {
        const switching = session.setEnv(command.env).catch((error: unknown) => {
          const code = KernelwardenError.isInstance(error) ? error.code : undefined;
          if (code === 'BOOTSTRAP_FAILED' || code === 'KERNEL_FACTORY') this.checkFailedSwitch(seq);
          throw error;
        });
        this.track('setEnv', seq, switching);
        break;
      }
      case 'restart':
        this.track('restart', seq, session.restart());
        break;
      case 'interrupt':
        this.mustNotWait('interrupt', sup.interrupt('python'));
        break;
      case 'restartCurrent': {
        const lease = sup.lease('python');
        // A restart waits for itself (it may be held); everything else must not wait for it.
        if (lease) {
          this.chaos++;
          // Its effect (a new lease) lands later, possibly in the middle of a switch.
          const restarting = sup.restartIfCurrent(lease).finally(() => this.chaos++);
          this.issued.push(restarting.catch(() => undefined));
        }
        break;
      }
      case 'shutdownCurrent': {
        const lease = sup.lease('python');
        this.chaos++;
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
        this.chaos++;
        if (lease) lease.kernel.live = false;
        break;
      }
      case 'factoryMode':
        this.factoryMode = command.mode;
        this.factoryTicks = command.ticks;
        break;
      case 'bootstrapMode':
        this.bootstrapMode = command.mode;
        this.bootstrapTicks = command.ticks;
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
        this.chaos++;
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

  countEvents(status: string): number {
    return this.events.filter((e) => e.status === status).length;
  }

  /** A switch that failed left the kernel it started from — lease, environment, generation — working. */
  checkFailedSwitch(seq: number): void {
    // The switch held the turn from its build on: the last main build is its own.
    const base = this.lastSwitchBase;
    if (base && this.countEvents('env_changed') !== base.envChanged) {
      this.failures.push(`failed setEnv #${seq} emitted env_changed`);
    }
    if (base?.built) {
      const record = this.handOvers.get(base.built);
      if (base.built.shutdownCalls !== record?.count) {
        this.failures.push(`failed setEnv #${seq} left its replacement ${base.built.id} running`);
      }
    }
    const lease = base?.lease;
    if (!base || !lease || base.chaos !== this.chaos) return;
    const sup = this.session.supervisor;
    const status = this.session.status();
    if (sup.lease('python') !== lease || !lease.kernel.isAlive()) {
      this.failures.push(`failed setEnv #${seq} replaced or lost the working kernel ${lease.kernel.id}`);
    }
    if (status.env !== base.env || status.generation !== lease.generation) {
      this.failures.push(
        `failed setEnv #${seq} moved env ${base.env} -> ${status.env}, generation ${lease.generation} -> ${status.generation}`,
      );
    }
  }

  check(step: string): void {
    const sup = this.session.supervisor;
    const current = sup.lease('python');
    // Every main kernel handed over is current, under a switch's bootstrap, or shut down once per hand-over; at
    // most one of them is live in the slot.
    for (const [kernel, { count, purpose }] of this.handOvers) {
      if (purpose !== 'main') continue;
      if (kernel.shutdownCalls > count) {
        this.failures.push(`${step}: ${kernel.id} shut down ${kernel.shutdownCalls} times for ${count} hand-overs`);
      }
      const inUse = kernel === current?.kernel || this.preparing.has(kernel);
      if (!inUse && kernel.shutdownCalls !== count) {
        this.failures.push(`${step}: ${kernel.id} is neither in use nor shut down`);
      }
      if (kernel === current?.kernel && kernel.shutdownCalls !== count - 1) {
        this.failures.push(`${step}: the current kernel was shut down`);
      }
    }
    if (current && this.preparing.has(current.kernel)) this.failures.push(`${step}: published before its bootstrap`);
    if (this.preparing.size > 1) this.failures.push(`${step}: ${this.preparing.size} switches bootstrapping at once`);
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
    for (const [kernel, { count, purpose }] of this.handOvers) {
      if (kernel.shutdownCalls !== count) {
        this.failures.push(`after close: ${purpose} ${kernel.id} shut down ${kernel.shutdownCalls} times for ${count}`);
      }
    }
    if (this.events.at(-1)?.status !== 'ended') this.failures.push('close did not emit ended last');
  }
}

describe('KernelSession model (fast-check)', () => {
  it('keeps its invariants under random interleavings of intents, failures, delays and deaths', async () => {
    const runs = Number(process.env.KW_MODEL_RUNS ?? 5000);
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
