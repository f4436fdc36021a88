import {
  type Clock,
  type EventMapOf,
  effectiveTimeout,
  InvalidOptionsError,
  isClock,
  raceSignal,
  systemClock,
  type Timer,
  TypedEmitter,
} from '@kernelwarden/core';
import { BuildCancelledError, ClosedError, KernelFactoryError, KernelRestartError } from './errors.js';
import type { Unsubscribe } from './events.js';
import type { EndedReason, Lease, SlotStatus, SupervisedKernel } from './lease.js';
import { isAlive, WarmPool, type WarmPoolOptions } from './pool.js';

/** What a kernel factory is told when the supervisor calls it. */
export interface BuildContext {
  /** The slot the kernel is for. */
  slot: string;
  /** The key it is built for. */
  key: string;
  /** `'main'` for a kernel `ensure` will publish; `'pool'` for a warm spare. */
  purpose: 'main' | 'pool';
  /** Aborts when the build is no longer wanted (stop, shutdown, superseded, the caller gave up). */
  signal: AbortSignal;
}

/**
 * Builds one kernel for a slot. It runs outside any lock; it may take as long as a kernel start takes.
 *
 * Return a started, live kernel or throw. Honour `ctx.signal` so a stop does not leave a kernel starting.
 */
export type KernelFactory<K extends SupervisedKernel> = (ctx: BuildContext) => K | Promise<K>;

/** Options of `new KernelSupervisor()`. */
export interface KernelSupervisorOptions {
  /**
   * A slot whose kernel was not used (ensured, held or published) for this long is shut down and reports
   * `state: 'ended', endedReason: 'idle_ttl'`. A slot under `hold()` never expires. `0` or absent disables it.
   * @defaultValue 0 (disabled)
   */
  idleTtlMs?: number;
  /** The clock for the idle timers. @defaultValue systemClock */
  clock?: Clock;
  /** Passed to every `kernel.shutdown({ timeoutMs })` the supervisor makes. `0` or absent: the kernel's default. */
  shutdownTimeoutMs?: number;
}

/** Options of `acquire` / `ensure`. */
export interface EnsureOptions<K extends SupervisedKernel = SupervisedKernel> {
  /** Gives up waiting for the build; the build is cancelled when no other caller waits for it. */
  signal?: AbortSignal;
  /**
   * Runs on a newly built kernel before it is published, while the current kernel stays in place (a session's
   * environment switch bootstraps here). A prepare that throws shuts the new kernel down, leaves the slot, its lease
   * and its generation as they were, and rejects with its error. When the build is cancelled (stop, supersession,
   * the caller gave up) its `signal` aborts and the kernel is shut down at once, without waiting for the prepare.
   * Not run on a reused or pooled kernel (the pool prepares its own); a call that joins a build in flight gets the
   * kernel as the call that started the build prepares it.
   */
  prepare?: (kernel: K, ctx: { slot: string; key: string; signal: AbortSignal }) => void | Promise<void>;
}

/** The answer of `acquire`: the lease and how it was obtained. */
export interface AcquireResult<K extends SupervisedKernel> {
  lease: Lease<K>;
  /** `'reused'`: the live same-key kernel; `'built'`: a new generation from the factory; `'pooled'`: a new
   * generation taken from the warm pool (already prepared). */
  outcome: 'reused' | 'built' | 'pooled';
  /** The lease this one replaced, when it replaced one. */
  previous?: Lease<K>;
}

/** Options of `stop()`. */
export interface StopOptions {
  /** Recorded as the slot's `endedReason`. @defaultValue 'manual_stop' */
  reason?: EndedReason;
  /** Marks the slot as manually stopped (`state: 'stopped'`) rather than ended. @defaultValue reason === 'manual_stop' */
  manual?: boolean;
  /** Stops waiting for the kernels' shutdowns (they go on; the slot is emptied at once either way). */
  signal?: AbortSignal;
}

/** The `signal` every waiting operation of the supervisor takes: aborting it ends the wait with its reason. */
export interface WaitOptions {
  signal?: AbortSignal;
}

/** A kernel that stays usable while a caller holds the slot: see `hold()`. */
export interface SlotHold extends Disposable {
  /** Ends the hold and counts as activity. Idempotent. */
  release(): void;
}

/** Events of a `KernelSupervisor`, by `type`. */
export type SupervisorEvent<K extends SupervisedKernel = SupervisedKernel> =
  | { type: 'published'; slot: string; lease: Lease<K>; previous?: Lease<K>; outcome: 'built' | 'pooled' }
  | { type: 'restarted'; slot: string; lease: Lease<K>; previous: Lease<K> }
  | { type: 'ended'; slot: string; lease?: Lease<K>; reason: EndedReason; manual: boolean }
  | { type: 'build_failed'; slot: string; key: string; error: unknown };

interface Build<K extends SupervisedKernel> {
  slot: string;
  key: string;
  controller: AbortController;
  waiters: number;
  revoked?: string;
  promise: Promise<AcquireResult<K>>;
}

interface SlotRecord<K extends SupervisedKernel> {
  name: string;
  current?: Lease<K>;
  lastKey?: string;
  generation: number;
  manualStop: boolean;
  endedReason?: EndedReason;
  builds: Set<Build<K>>;
  restarting?: { leaseId: string; promise: Promise<Lease<K> | undefined> };
  holds: number;
  lastActivityAt?: number;
  idleTimer?: Timer;
}

/**
 * Slots of kernels with leases and generations. Each slot (`'python'`, `'r'`, …) holds at most one current kernel;
 * every new kernel or restart in a slot is a new generation, and exact-lease operations act only on the generation
 * they were given.
 *
 * Its "lock" is JavaScript's run-to-completion: every state change is a synchronous step, and factories, restarts,
 * shutdowns and bootstraps run between steps, so `interrupt`, `status`, `lease` and `stop` never wait for them.
 * Use it directly to supervise kernels, or through `KernelSession`.
 */
export class KernelSupervisor<K extends SupervisedKernel = SupervisedKernel> {
  readonly #slots = new Map<string, SlotRecord<K>>();
  readonly #pools = new Map<string, WarmPool<K>>();
  readonly #pending = new Set<Promise<unknown>>();
  /** How many times a factory handed each kernel over: a handle published again is a new one to shut down. */
  readonly #handOvers = new WeakMap<object, number>();
  /** The hand-over of each kernel that was shut down (or is being shut down). */
  readonly #shutDown = new WeakMap<object, number>();
  readonly #events = new TypedEmitter<EventMapOf<SupervisorEvent<K>>>();
  readonly #clock: Clock;
  readonly #idleTtlMs: number | undefined;
  readonly #shutdownTimeoutMs: number | undefined;
  #closed = false;

  constructor(opts: KernelSupervisorOptions = {}) {
    validateSupervisorOptions(opts, 'options');
    this.#clock = opts.clock ?? systemClock;
    this.#idleTtlMs = effectiveTimeout(opts.idleTtlMs);
    this.#shutdownTimeoutMs = effectiveTimeout(opts.shutdownTimeoutMs);
  }

  /** True once `shutdownAll()` was called. */
  get closed(): boolean {
    return this.#closed;
  }

  #emit(event: SupervisorEvent<K>): void {
    this.#events.emit(event.type, event);
  }

  /** Listens to one kind of event; returns the function that stops listening. */
  on<T extends SupervisorEvent<K>['type']>(
    type: T,
    listener: (event: Extract<SupervisorEvent<K>, { type: T }>) => void,
  ): Unsubscribe {
    return this.#events.on(type, listener);
  }

  /**
   * Returns the slot's lease: the live kernel with the same key when there is one; otherwise a kernel from the warm
   * pool, or a new one from `factory` — built first, and only once built swapped in (generation + 1) while the old
   * one is shut down. A factory that throws or returns a dead kernel changes nothing and rejects with
   * `KernelFactoryError`. Concurrent calls for the same slot and key share one build.
   */
  async ensure(slot: string, key: string, factory: KernelFactory<K>, opts: EnsureOptions<K> = {}): Promise<Lease<K>> {
    return (await this.acquire(slot, key, factory, opts)).lease;
  }

  /** Like `ensure`, and also says whether the lease was reused, built or taken from the pool. */
  async acquire(
    slot: string,
    key: string,
    factory: KernelFactory<K>,
    opts: EnsureOptions<K> = {},
  ): Promise<AcquireResult<K>> {
    checkSlotName(slot);
    if (typeof key !== 'string') throw new InvalidOptionsError([{ path: 'key', message: 'expected a string' }]);
    if (typeof factory !== 'function') {
      throw new InvalidOptionsError([{ path: 'factory', message: 'expected a function' }]);
    }
    for (;;) {
      this.#assertOpen();
      opts.signal?.throwIfAborted();
      const s = this.#slot(slot);
      const cur = s.current;
      if (cur && s.restarting?.leaseId === cur.id && cur.key === key) {
        // The same-key kernel is being restarted (the watchdog's ladder): wait for the restart to settle.
        await raceSignal(
          s.restarting.promise.catch(() => undefined),
          opts.signal,
        );
        continue;
      }
      if (cur && cur.key === key && isAlive(cur.kernel)) {
        s.manualStop = false;
        this.#touch(s);
        return { lease: cur, outcome: 'reused' };
      }
      const shared = [...s.builds].find((b) => b.key === key && !b.revoked);
      if (shared) return this.#waitFor(shared, opts.signal);
      const pooled = this.#pools.get(poolId(slot, key))?.take();
      if (pooled) {
        this.#revokeBuilds(s, `superseded by a pooled "${key}" kernel`);
        const result = this.#publish(s, key, pooled, 'pooled');
        if (result.previous && result.previous.kernel !== pooled) await this.#shutdownKernel(result.previous.kernel);
        return result;
      }
      return this.#waitFor(this.#startBuild(s, key, factory, opts.prepare), opts.signal);
    }
  }

  /** The slot's current lease, or `undefined` when it holds no kernel. Answers at once. */
  lease(slot: string): Lease<K> | undefined {
    return this.#slots.get(slot)?.current;
  }

  /** True while `lease` is the slot's current lease (same kernel, same generation). */
  isCurrent(lease: Lease<K>): boolean {
    const cur = this.#slots.get(lease.slot)?.current;
    return cur !== undefined && cur.id === lease.id && cur.kernel === lease.kernel;
  }

  /** The names of every slot the supervisor has seen. */
  slots(): string[] {
    return [...this.#slots.keys()].sort();
  }

  /** The slot's state; answers at once whatever is being built, restarted or bootstrapped. */
  status(slot: string): SlotStatus {
    const s = this.#slots.get(slot);
    if (!s)
      return {
        state: 'empty',
        alive: false,
        generation: 0,
        key: undefined,
        manualStop: false,
        building: false,
        restarting: false,
      };
    const alive = s.current !== undefined && isAlive(s.current.kernel);
    let endedReason = s.endedReason;
    if (s.current && !alive && !endedReason) endedReason = 'worker_died';
    const state: SlotStatus['state'] = alive
      ? 'running'
      : s.manualStop
        ? 'stopped'
        : endedReason !== undefined
          ? 'ended'
          : 'empty';
    const status: SlotStatus = {
      state,
      alive,
      generation: Math.max(0, s.generation),
      key: s.current?.key ?? s.lastKey,
      manualStop: s.manualStop,
      building: [...s.builds].some((b) => !b.revoked),
      restarting: s.restarting !== undefined,
    };
    if (!alive && endedReason !== undefined) status.endedReason = endedReason;
    if (s.current) status.leaseId = s.current.id;
    if (s.lastActivityAt !== undefined) status.lastActivityAt = s.lastActivityAt;
    return status;
  }

  /**
   * Interrupts the current kernel of `slot`, or of every slot; resolves with how many interrupts were delivered.
   * Never waits for a build, restart or bootstrap.
   */
  async interrupt(slot?: string, opts: WaitOptions = {}): Promise<number> {
    opts.signal?.throwIfAborted();
    const leases = this.#targets(slot).flatMap((s) => (s.current ? [s.current] : []));
    const delivered = await raceSignal(
      Promise.all(leases.map((lease) => deliverInterrupt(lease.kernel, opts.signal))),
      opts.signal,
    );
    return delivered.filter(Boolean).length;
  }

  /** Interrupts the kernel only while `lease` is current; true when the interrupt was delivered. */
  async interruptIfCurrent(lease: Lease<K>, opts: WaitOptions = {}): Promise<boolean> {
    opts.signal?.throwIfAborted();
    if (!this.isCurrent(lease)) return false;
    return raceSignal(deliverInterrupt(lease.kernel, opts.signal), opts.signal);
  }

  /** Hard-stops the kernel's interpreter (`kill()`) only while `lease` is current; true when it did. */
  async killIfCurrent(lease: Lease<K>, opts: WaitOptions = {}): Promise<boolean> {
    opts.signal?.throwIfAborted();
    if (!this.isCurrent(lease) || typeof lease.kernel.kill !== 'function') return false;
    const kill = lease.kernel.kill(opts.signal ? { signal: opts.signal } : undefined).then(
      () => true,
      () => false,
    );
    return raceSignal(kill, opts.signal);
  }

  /**
   * Restarts the kernel (same object, fresh interpreter) only while `lease` is current, and returns the new lease
   * (generation + 1) — or `undefined` when the lease is stale or the slot changed during the restart. A restart that
   * fails empties the slot (`endedReason: 'restart_failed'`) and rejects with `KernelRestartError`.
   *
   * With `alreadyRestarted` (the kernel's `kill()` resolved `{ restarted: true }`: it already runs a fresh
   * interpreter), `restart()` is not called: only the next generation is published.
   */
  async restartIfCurrent(
    lease: Lease<K>,
    opts: { signal?: AbortSignal; alreadyRestarted?: boolean } = {},
  ): Promise<Lease<K> | undefined> {
    if (!this.isCurrent(lease)) return undefined;
    const s = this.#slot(lease.slot);
    if (s.restarting?.leaseId === lease.id) return s.restarting.promise;
    const kernel = lease.kernel;
    const run = async (): Promise<Lease<K> | undefined> => {
      if (!opts.alreadyRestarted) await this.#restartKernel(lease, opts.signal);
      if (!this.isCurrent(lease)) return undefined;
      if (!isAlive(kernel)) {
        await this.shutdownIfCurrent(lease, 'restart_failed');
        throw new KernelRestartError(lease.slot, 'the kernel was not alive after its restart');
      }
      s.generation += 1;
      const next: Lease<K> = { slot: s.name, key: lease.key, generation: s.generation, id: newLeaseId(), kernel };
      s.current = next;
      this.#touch(s);
      this.#emit({ type: 'restarted', slot: s.name, lease: next, previous: lease });
      return next;
    };
    const promise = run().finally(() => {
      if (s.restarting?.promise === promise) s.restarting = undefined;
    });
    s.restarting = { leaseId: lease.id, promise };
    return promise;
  }

  async #restartKernel(lease: Lease<K>, signal: AbortSignal | undefined): Promise<void> {
    const kernel = lease.kernel;
    if (typeof kernel.restart !== 'function') {
      await this.shutdownIfCurrent(lease, 'restart_failed');
      throw new KernelRestartError(lease.slot, 'the kernel has no restart()');
    }
    try {
      await kernel.restart(signal ? { signal } : undefined);
    } catch (error) {
      await this.shutdownIfCurrent(lease, 'restart_failed');
      throw new KernelRestartError(lease.slot, messageOf(error), error);
    }
  }

  /**
   * Empties the slot and shuts the kernel down, only while `lease` is current; true when it did.
   * @param reason - Recorded as the slot's `endedReason`. @defaultValue 'desynchronized'
   */
  async shutdownIfCurrent(
    lease: Lease<K>,
    reason: EndedReason = 'desynchronized',
    opts: WaitOptions = {},
  ): Promise<boolean> {
    if (!this.isCurrent(lease)) return false;
    const s = this.#slot(lease.slot);
    const detached = this.#detach(s, reason, false);
    if (detached) await raceSignal(this.#shutdownKernel(detached.kernel), opts.signal);
    return true;
  }

  /**
   * Stops `slot` (or every slot): cancels its builds, empties it and shuts its kernel down. An explicit slot that
   * never held a kernel is still marked, so "stopped before the first start" is recorded. Resolves with the number
   * of kernels shut down; never waits for a build.
   */
  async stop(slot?: string, opts: StopOptions = {}): Promise<number> {
    const reason = opts.reason ?? 'manual_stop';
    const manual = opts.manual ?? reason === 'manual_stop';
    const targets = slot === undefined ? [...this.#slots.values()] : [this.#slot(checkSlotName(slot))];
    const detached: Lease<K>[] = [];
    for (const s of targets) {
      this.#revokeBuilds(s, 'the slot was stopped');
      const lease = this.#detach(s, reason, manual);
      if (lease) detached.push(lease);
      else {
        s.manualStop = manual;
        if (s.endedReason === undefined || manual) s.endedReason = reason;
      }
    }
    await raceSignal(Promise.all(detached.map((lease) => this.#shutdownKernel(lease.kernel))), opts.signal);
    return detached.length;
  }

  /**
   * Closes the supervisor: stops every slot (`endedReason: 'shutdown'`), drains the warm pools, and refuses further
   * `ensure` calls. Builds still in flight are cancelled; await `settled()` to wait until their kernels are shut down.
   */
  async shutdownAll(opts: WaitOptions = {}): Promise<void> {
    this.#closed = true;
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    await raceSignal(
      Promise.all([this.stop(undefined, { reason: 'shutdown', manual: false }), ...pools.map((p) => p.drain())]),
      opts.signal,
    );
  }

  /** Resolves once every build, pool refill and shutdown the supervisor started has settled. */
  async settled(opts: WaitOptions = {}): Promise<void> {
    while (this.#pending.size > 0) await raceSignal(Promise.allSettled([...this.#pending]), opts.signal);
  }

  /**
   * Keeps `slot` from idle expiry until the hold is released, and counts as activity at both ends. Take one around
   * every use of a kernel when `idleTtlMs` is set (`KernelSession` does).
   */
  hold(slot: string): SlotHold {
    const s = this.#slot(checkSlotName(slot));
    s.holds += 1;
    this.#touch(s);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      s.holds -= 1;
      this.#touch(s);
    };
    return { release, [Symbol.dispose]: release };
  }

  /** Records activity on `slot` now, restarting its idle timer. */
  touch(slot: string): void {
    const s = this.#slots.get(slot);
    if (s) this.#touch(s);
  }

  /**
   * Keeps `size` started (and `prepare`d) kernels ready for `slot` with `key`, so that `ensure(slot, key)` on a slot
   * without a live same-key kernel hands one over at once and refills in the background. Replaces an earlier pool
   * for the same slot and key; `size: 0` removes it.
   */
  configurePool(slot: string, key: string, factory: KernelFactory<K>, opts: WarmPoolOptions<K>): void {
    checkSlotName(slot);
    if (!Number.isInteger(opts.size) || opts.size < 0) {
      throw new InvalidOptionsError([{ path: 'pool.size', message: 'expected an integer >= 0' }], { subject: 'pool' });
    }
    this.#assertOpen();
    const id = poolId(slot, key);
    const old = this.#pools.get(id);
    this.#pools.delete(id);
    if (old) this.#track(old.drain());
    if (opts.size === 0) return;
    const pool = new WarmPool<K>({
      slot,
      key,
      factory: async (ctx) => this.#handOver(await factory(ctx)),
      size: opts.size,
      ...(opts.prepare ? { prepare: opts.prepare } : {}),
      shutdown: (k) => this.#shutdownKernel(k),
      track: (p) => this.#track(p),
    });
    this.#pools.set(id, pool);
    pool.fill();
  }

  /** Shuts down the pooled kernels of `slot` (for one key, or all keys) and stops refilling them. */
  async drainPool(slot: string, key?: string, opts: WaitOptions = {}): Promise<void> {
    const drained: Promise<void>[] = [];
    for (const [id, pool] of this.#pools) {
      if (pool.slot === slot && (key === undefined || pool.key === key)) {
        this.#pools.delete(id);
        drained.push(pool.drain());
      }
    }
    await raceSignal(Promise.all(drained), opts.signal);
  }

  /**
   * Resolves once the pool of `slot` and `key` holds its full size of ready kernels; rejects with the refill's
   * error when a build failed, or at once when there is no such pool.
   */
  async poolReady(slot: string, key: string, opts: { signal?: AbortSignal } = {}): Promise<void> {
    const pool = this.#pools.get(poolId(slot, key));
    if (!pool) throw new InvalidOptionsError([{ path: 'key', message: `no warm pool for "${slot}" / "${key}"` }]);
    await pool.ready(opts.signal);
  }

  /** How many pooled kernels are ready for `slot` and `key`, and whether a refill is running. */
  poolStatus(slot: string, key: string): { ready: number; filling: boolean; size: number; lastError?: unknown } {
    const pool = this.#pools.get(poolId(slot, key));
    if (!pool) return { ready: 0, filling: false, size: 0 };
    return pool.status();
  }

  #assertOpen(): void {
    if (this.#closed) throw new ClosedError('supervisor');
  }

  #slot(name: string): SlotRecord<K> {
    let s = this.#slots.get(name);
    if (!s) {
      s = { name, generation: -1, manualStop: false, builds: new Set(), holds: 0 };
      this.#slots.set(name, s);
    }
    return s;
  }

  #targets(slot: string | undefined): SlotRecord<K>[] {
    if (slot === undefined) return [...this.#slots.values()];
    const s = this.#slots.get(slot);
    return s ? [s] : [];
  }

  #startBuild(
    s: SlotRecord<K>,
    key: string,
    factory: KernelFactory<K>,
    prepare: EnsureOptions<K>['prepare'],
  ): Build<K> {
    this.#revokeBuilds(s, `superseded by an ensure with key "${key}"`);
    const controller = new AbortController();
    const build = { slot: s.name, key, controller, waiters: 0 } as Build<K>;
    s.builds.add(build);
    const fail = (failure: unknown): unknown => {
      this.#emit({ type: 'build_failed', slot: s.name, key, error: failure });
      return failure;
    };
    const run = async (): Promise<AcquireResult<K>> => {
      let kernel: K;
      try {
        kernel = this.#handOver(await factory({ slot: s.name, key, purpose: 'main', signal: controller.signal }));
      } catch (error) {
        s.builds.delete(build);
        if (build.revoked) throw new BuildCancelledError(s.name, build.revoked);
        throw fail(new KernelFactoryError(s.name, key, messageOf(error), error));
      }
      try {
        if (build.revoked) throw new BuildCancelledError(s.name, build.revoked);
        if (!isAlive(kernel)) throw fail(new KernelFactoryError(s.name, key, 'the factory returned a dead kernel'));
        if (prepare) {
          await this.#prepare(build, kernel, prepare).catch((error: unknown) => {
            throw build.revoked ? new BuildCancelledError(s.name, build.revoked) : fail(error);
          });
          if (!isAlive(kernel)) throw fail(new KernelFactoryError(s.name, key, 'the kernel died while prepared'));
          // Revoked after the prepare settled but before this continuation ran (a stop in between).
          if (build.revoked) throw new BuildCancelledError(s.name, build.revoked);
        }
      } catch (error) {
        s.builds.delete(build);
        await this.#shutdownKernel(kernel);
        throw error;
      }
      s.builds.delete(build);
      const result = this.#publish(s, key, kernel, 'built');
      if (result.previous && result.previous.kernel !== kernel) await this.#shutdownKernel(result.previous.kernel);
      return result;
    };
    build.promise = run();
    build.promise.catch(() => {});
    this.#track(build.promise);
    return build;
  }

  /**
   * Runs a build's `prepare` until it settles or the build is revoked; on revocation the kernel is shut down at once
   * (which also ends a prepare that waits on the kernel) instead of waiting for a prepare that ignores its signal.
   */
  async #prepare(build: Build<K>, kernel: K, prepare: NonNullable<EnsureOptions<K>['prepare']>): Promise<void> {
    const signal = build.controller.signal;
    const preparing = (async () => prepare(kernel, { slot: build.slot, key: build.key, signal }))();
    preparing.catch(() => {});
    await raceSignal(preparing, signal);
  }

  async #waitFor(build: Build<K>, signal: AbortSignal | undefined): Promise<AcquireResult<K>> {
    build.waiters += 1;
    try {
      // A revoked build rejects its waiters at once (with BuildCancelledError); its kernel is shut down on arrival.
      return await raceSignal(raceSignal(build.promise, build.controller.signal), signal);
    } catch (error) {
      if (signal?.aborted && build.waiters === 1) this.#revoke(build, 'the caller gave up waiting');
      throw error;
    } finally {
      build.waiters -= 1;
    }
  }

  #revokeBuilds(s: SlotRecord<K>, why: string): void {
    for (const build of s.builds) this.#revoke(build, why);
  }

  #revoke(build: Build<K>, why: string): void {
    if (build.revoked) return;
    build.revoked = why;
    build.controller.abort(new BuildCancelledError(build.slot, why));
  }

  #publish(s: SlotRecord<K>, key: string, kernel: K, outcome: 'built' | 'pooled'): AcquireResult<K> {
    const previous = s.current;
    s.generation += 1;
    const lease: Lease<K> = { slot: s.name, key, generation: s.generation, id: newLeaseId(), kernel };
    s.current = lease;
    s.lastKey = key;
    s.manualStop = false;
    s.endedReason = undefined;
    this.#touch(s);
    this.#emit({ type: 'published', slot: s.name, lease, outcome, ...(previous ? { previous } : {}) });
    return previous ? { lease, outcome, previous } : { lease, outcome };
  }

  #detach(s: SlotRecord<K>, reason: EndedReason, manual: boolean): Lease<K> | undefined {
    const lease = s.current;
    s.idleTimer?.cancel();
    s.idleTimer = undefined;
    if (!lease) return undefined;
    s.current = undefined;
    s.manualStop = manual;
    s.endedReason = reason;
    this.#emit({ type: 'ended', slot: s.name, lease, reason, manual });
    return lease;
  }

  #touch(s: SlotRecord<K>): void {
    s.lastActivityAt = this.#clock.now();
    s.idleTimer?.cancel();
    s.idleTimer = undefined;
    const ttl = this.#idleTtlMs;
    if (ttl === undefined || !s.current || s.holds > 0 || this.#closed) return;
    const lease = s.current;
    s.idleTimer = this.#clock.setTimer(() => {
      s.idleTimer = undefined;
      if (s.holds > 0 || !this.isCurrent(lease)) return;
      this.#revokeBuilds(s, 'the slot expired');
      const detached = this.#detach(s, 'idle_ttl', false);
      if (detached) this.#track(this.#shutdownKernel(detached.kernel));
    }, ttl);
  }

  /** Records that a factory handed `kernel` over: from now on it is a kernel to shut down, even if it was before. */
  #handOver(kernel: K): K {
    if (typeof kernel === 'object' && kernel !== null)
      this.#handOvers.set(kernel, (this.#handOvers.get(kernel) ?? 0) + 1);
    return kernel;
  }

  /**
   * Shuts a kernel down exactly once per hand-over, whatever asks for it; never throws. A handle that a factory
   * hands over again after it was shut down (a cached connection, revived) is shut down again when its turn comes.
   */
  #shutdownKernel(kernel: K): Promise<void> {
    const handOver = this.#handOvers.get(kernel) ?? 0;
    if (this.#shutDown.get(kernel) === handOver) return Promise.resolve();
    this.#shutDown.set(kernel, handOver);
    let call: Promise<unknown>;
    try {
      call = Promise.resolve(
        kernel.shutdown(this.#shutdownTimeoutMs === undefined ? undefined : { timeoutMs: this.#shutdownTimeoutMs }),
      );
    } catch {
      call = Promise.resolve();
    }
    const done = call.then(
      (outcome) => {
        if (isUnconfirmed(outcome)) this.#track(this.#retryShutdown(kernel, handOver, 0));
      },
      () => undefined,
    );
    this.#track(done);
    return done;
  }

  /**
   * A shutdown that came back `{ confirmed: false }` (a DELETE refused while the server auto-restarts the kernel, a
   * gateway that timed out) is tried again in the background, so the kernel is not left running on the server.
   */
  async #retryShutdown(kernel: K, handOver: number, attempt: number): Promise<void> {
    const delay = SHUTDOWN_RETRY_DELAYS_MS[attempt];
    if (delay === undefined) return;
    await new Promise<void>((resolve) => this.#clock.setTimer(resolve, delay));
    // Handed over again meanwhile: it is in use, and its next shutdown is another one's business.
    if (this.#handOvers.get(kernel) !== handOver) return;
    let outcome: unknown;
    try {
      outcome = await kernel.shutdown(
        this.#shutdownTimeoutMs === undefined ? undefined : { timeoutMs: this.#shutdownTimeoutMs },
      );
    } catch {
      return;
    }
    if (isUnconfirmed(outcome)) await this.#retryShutdown(kernel, handOver, attempt + 1);
  }

  #track(promise: Promise<unknown>): void {
    const settled = promise.then(
      () => undefined,
      () => undefined,
    );
    this.#pending.add(settled);
    void settled.then(() => this.#pending.delete(settled));
  }
}

/** Delays before each retry of an unconfirmed kernel shutdown. */
const SHUTDOWN_RETRY_DELAYS_MS = [500, 2000, 5000];

function isUnconfirmed(outcome: unknown): boolean {
  return typeof outcome === 'object' && outcome !== null && (outcome as { confirmed?: unknown }).confirmed === false;
}

async function deliverInterrupt(kernel: SupervisedKernel, signal?: AbortSignal): Promise<boolean> {
  try {
    const result = await kernel.interrupt(signal ? { signal } : undefined);
    return (result as { delivered?: boolean } | undefined)?.delivered !== false;
  } catch {
    return false;
  }
}

function poolId(slot: string, key: string): string {
  return JSON.stringify([slot, key]);
}

function checkSlotName(slot: unknown): string {
  if (typeof slot !== 'string' || slot.length === 0) {
    throw new InvalidOptionsError([{ path: 'slot', message: 'expected a non-empty string' }]);
  }
  return slot;
}

function newLeaseId(): string {
  return globalThis.crypto.randomUUID();
}

/** The message of an unknown thrown value. */
export function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}

function validateSupervisorOptions(opts: KernelSupervisorOptions, base: string): void {
  const issues: { path: string; message: string }[] = [];
  if (opts === null || typeof opts !== 'object') {
    throw new InvalidOptionsError([{ path: '', message: 'expected an object' }], { subject: 'supervisor options' });
  }
  if (opts.idleTtlMs !== undefined && (typeof opts.idleTtlMs !== 'number' || Number.isNaN(opts.idleTtlMs))) {
    issues.push({ path: `${base}.idleTtlMs`, message: 'expected a number of milliseconds' });
  }
  if (
    opts.shutdownTimeoutMs !== undefined &&
    (typeof opts.shutdownTimeoutMs !== 'number' || Number.isNaN(opts.shutdownTimeoutMs))
  ) {
    issues.push({ path: `${base}.shutdownTimeoutMs`, message: 'expected a number of milliseconds' });
  }
  if (opts.clock !== undefined && !isClock(opts.clock)) {
    issues.push({ path: `${base}.clock`, message: 'expected a Clock with now() and setTimer()' });
  }
  if (issues.length > 0) throw new InvalidOptionsError(issues, { subject: 'supervisor options' });
}
