import { type Clock, type EventMapOf, InvalidOptionsError, raceSignal, TypedEmitter } from '@kernelwarden/core';
import { ClosedError, KernelRestartError, messageOf } from './errors.js';
import type { Unsubscribe } from './events.js';
import { KernelBuild } from './kernel-build.js';
import { KernelShutdowns } from './kernel-shutdowns.js';
import { type EndedReason, isAlive, type Lease, type SlotStatus, type SupervisedKernel } from './lease.js';
import { emptySlotRecord, type SlotRecord, slotStatus } from './slot-record.js';
import type {
  AcquireResult,
  EnsureOptions,
  KernelFactory,
  SlotHold,
  SlotSupervisor,
  StopOptions,
  SupervisorEvent,
  WaitOptions,
} from './slot-supervisor.js';
import type { SparesOptions, SparesStatus } from './spare-set.js';
import { Spares } from './spares.js';
import { type KernelSupervisorOptions, resolveSupervisorOptions } from './supervisor-options.js';

/**
 * Slots of kernels with leases and generations. Each slot (`'python'`, `'r'`, …) holds at most one current kernel;
 * every new kernel or restart in a slot is a new generation, and exact-lease operations act only on the generation
 * they were given.
 *
 * Its "lock" is JavaScript's run-to-completion: every state change is a synchronous step, and factories, restarts,
 * shutdowns and bootstraps run between steps, so `interrupt`, `status`, `lease` and `stop` never wait for them.
 * Use it directly to supervise kernels, or through `KernelSession`.
 */
export class KernelSupervisor<K extends SupervisedKernel = SupervisedKernel> implements SlotSupervisor<K> {
  readonly #slots = new Map<string, SlotRecord<K>>();
  readonly #spares: Spares<K>;
  readonly #events = new TypedEmitter<EventMapOf<SupervisorEvent<K>>>();

  #emit(event: SupervisorEvent<K>): void {
    this.#events.emit(event.type, event);
  }
  readonly #clock: Clock;
  readonly #idleTtlMs: number | undefined;
  readonly #shutdowns: KernelShutdowns<K>;
  #closed = false;

  /** Validates the options (`InvalidOptionsError` naming the field) and applies their defaults. */
  constructor(opts: KernelSupervisorOptions = {}) {
    const resolved = resolveSupervisorOptions(opts);
    this.#clock = resolved.clock;
    this.#idleTtlMs = resolved.idleTtlMs;
    this.#shutdowns = new KernelShutdowns<K>(resolved.clock, resolved.shutdownTimeoutMs);
    this.#spares = new Spares<K>(this.#shutdowns);
  }

  /** True once `shutdownAll()` was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Listens to one kind of event; returns the function that stops listening. */
  on<T extends SupervisorEvent<K>['type']>(
    type: T,
    listener: (event: Extract<SupervisorEvent<K>, { type: T }>) => void,
  ): Unsubscribe {
    return this.#events.on(type, listener);
  }

  /**
   * Returns the slot's lease: the live kernel with the same key when there is one; otherwise one of its spare
   * kernels, or a new one from `factory` — built first, and only once built swapped in (generation + 1) while the old
   * one is shut down. A factory that throws or returns a dead kernel changes nothing and rejects with
   * `KernelFactoryError`. Concurrent calls for the same slot and key share one build.
   */
  async ensure(slot: string, key: string, factory: KernelFactory<K>, opts: EnsureOptions<K> = {}): Promise<Lease<K>> {
    return (await this.acquire(slot, key, factory, opts)).lease;
  }

  /** Like `ensure`, and also says whether the lease was reused, built or taken from the spares. */
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
      if (shared) return shared.wait(opts.signal);
      const spare = this.#spares.take(slot, key);
      if (spare) {
        this.#revokeBuilds(s, `superseded by a spare "${key}" kernel`);
        return this.#publishAndRetire(s, key, spare, 'spare');
      }
      return this.#startBuild(s, key, factory, opts.prepare).wait(opts.signal);
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
    return slotStatus(this.#slots.get(slot));
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
    if (detached) await raceSignal(this.#shutdowns.shutdown(detached.kernel), opts.signal);
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
    await raceSignal(Promise.all(detached.map((lease) => this.#shutdowns.shutdown(lease.kernel))), opts.signal);
    return detached.length;
  }

  /**
   * Closes the supervisor: stops every slot (`endedReason: 'shutdown'`), drains the spare sets, and refuses further
   * `ensure` calls. Builds still in flight are cancelled; await `settled()` to wait until their kernels are shut down.
   */
  async shutdownAll(opts: WaitOptions = {}): Promise<void> {
    this.#closed = true;
    await raceSignal(
      Promise.all([this.stop(undefined, { reason: 'shutdown', manual: false }), this.#spares.drain(undefined)]),
      opts.signal,
    );
  }

  /** Resolves once every build, spare refill and shutdown the supervisor started has settled. */
  async settled(opts: WaitOptions = {}): Promise<void> {
    while (this.#shutdowns.busy) await raceSignal(this.#shutdowns.allSettled(), opts.signal);
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
   * without a live same-key kernel hands one over at once and refills in the background. Replaces an earlier spare set
   * for the same slot and key; `size: 0` removes it.
   */
  configureSpares(slot: string, key: string, factory: KernelFactory<K>, opts: SparesOptions<K>): void {
    checkSlotName(slot);
    if (Number.isInteger(opts.size) && opts.size >= 0) this.#assertOpen();
    this.#spares.configure(slot, key, factory, opts);
  }

  /** Shuts down the spare kernels of `slot` (for one key, or all keys) and stops refilling them. */
  async drainSpares(slot: string, key?: string, opts: WaitOptions = {}): Promise<void> {
    await raceSignal(this.#spares.drain(slot, key), opts.signal);
  }

  /**
   * Resolves once the spare set of `slot` and `key` holds its full size of ready kernels; rejects with the refill's
   * error when a build failed, or at once when there is no such set.
   */
  async sparesReady(slot: string, key: string, opts: WaitOptions = {}): Promise<void> {
    await this.#spares.ready(slot, key, opts.signal);
  }

  /** How many spare kernels are ready for `slot` and `key`, and whether a refill is running. */
  sparesStatus(slot: string, key: string): SparesStatus {
    return this.#spares.status(slot, key);
  }

  #assertOpen(): void {
    if (this.#closed) throw new ClosedError('supervisor');
  }

  #slot(name: string): SlotRecord<K> {
    let s = this.#slots.get(name);
    if (!s) {
      s = emptySlotRecord<K>(name);
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
  ): KernelBuild<K> {
    this.#revokeBuilds(s, `superseded by an ensure with key "${key}"`);
    const build = new KernelBuild<K>({ slot: s.name, key, factory, prepare }, s.builds, {
      handOver: (kernel) => this.#shutdowns.handOver(kernel),
      shutdown: (kernel) => this.#shutdowns.shutdown(kernel),
      failed: (error) => this.#emit({ type: 'build_failed', slot: s.name, key, error }),
      publish: (kernel) => this.#publishAndRetire(s, key, kernel, 'built'),
    });
    this.#shutdowns.track(build.promise);
    return build;
  }

  #revokeBuilds(s: SlotRecord<K>, why: string): void {
    for (const build of s.builds) build.revoke(why);
  }

  #publish(s: SlotRecord<K>, key: string, kernel: K, outcome: 'built' | 'spare'): AcquireResult<K> {
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

  /** Publishes `kernel` (synchronously) and then shuts down the kernel it replaced, if another one. */
  async #publishAndRetire(
    s: SlotRecord<K>,
    key: string,
    kernel: K,
    outcome: 'built' | 'spare',
  ): Promise<AcquireResult<K>> {
    const result = this.#publish(s, key, kernel, outcome);
    if (result.previous && result.previous.kernel !== kernel) await this.#shutdowns.shutdown(result.previous.kernel);
    return result;
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
      if (detached) this.#shutdowns.track(this.#shutdowns.shutdown(detached.kernel));
    }, ttl);
  }
}

async function deliverInterrupt(kernel: SupervisedKernel, signal?: AbortSignal): Promise<boolean> {
  try {
    const result = await kernel.interrupt(signal ? { signal } : undefined);
    return (result as { delivered?: boolean } | undefined)?.delivered !== false;
  } catch {
    return false;
  }
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
