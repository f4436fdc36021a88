import type { EndedReason, Lease, SlotStatus, SupervisedKernel } from './lease.js';

/** What a kernel factory is told when the supervisor calls it. */
export interface BuildContext {
  /** The slot the kernel is for. */
  slot: string;
  /** The key it is built for. */
  key: string;
  /** `'main'` for a kernel `ensure` will publish; `'spare'` for a warm spare. */
  purpose: 'main' | 'spare';
  /** Aborts when the build is no longer wanted (stop, shutdown, superseded, the caller gave up). */
  signal: AbortSignal;
}

/**
 * Builds one kernel for a slot. It runs outside any lock; it may take as long as a kernel start takes.
 *
 * Return a started, live kernel or throw. Honour `ctx.signal` so a stop does not leave a kernel starting.
 */
export type KernelFactory<K extends SupervisedKernel> = (ctx: BuildContext) => K | Promise<K>;

/** Options of `acquire` / `ensure`. */
export interface EnsureOptions<K extends SupervisedKernel = SupervisedKernel> {
  /** Gives up waiting for the build; the build is cancelled when no other caller waits for it. */
  signal?: AbortSignal;
  /**
   * Runs on a newly built kernel before it is published, while the current kernel stays in place (a session's
   * environment switch bootstraps here). A prepare that throws shuts the new kernel down, leaves the slot, its lease
   * and its generation as they were, and rejects with its error. When the build is cancelled (stop, supersession,
   * the caller gave up) its `signal` aborts and the kernel is shut down at once, without waiting for the prepare.
   * Not run on a reused or spare kernel (the spare set prepares its own); a call that joins a build in flight gets the
   * kernel as the call that started the build prepares it.
   */
  prepare?: (kernel: K, ctx: { slot: string; key: string; signal: AbortSignal }) => void | Promise<void>;
}

/** The answer of `acquire`: the lease and how it was obtained. */
export interface AcquireResult<K extends SupervisedKernel> {
  lease: Lease<K>;
  /** `'reused'`: the live same-key kernel; `'built'`: a new generation from the factory; `'spare'`: a new
   * generation taken from the spares (already prepared). */
  outcome: 'reused' | 'built' | 'spare';
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
  | { type: 'published'; slot: string; lease: Lease<K>; previous?: Lease<K>; outcome: 'built' | 'spare' }
  | { type: 'restarted'; slot: string; lease: Lease<K>; previous: Lease<K> }
  | { type: 'ended'; slot: string; lease?: Lease<K>; reason: EndedReason; manual: boolean }
  | { type: 'build_failed'; slot: string; key: string; error: unknown };

/**
 * A supervisor as executors and language slots see it: the slot, lease and exact-lease operations of
 * `KernelSupervisor`, without its spare sets and its own lifecycle.
 *
 * `CellRunRequest.supervisor` and `LanguageSlotContext.supervisor` have this type, so that one executor or language
 * slot serves a supervisor of any kernel type: a `KernelSupervisor<GatewayKernel>` is a
 * `SlotSupervisor<SupervisedKernel>`. Implement it only to wrap a `KernelSupervisor`.
 */
export interface SlotSupervisor<K extends SupervisedKernel = SupervisedKernel> {
  /** See `KernelSupervisor.acquire`: `ensure` that also says how the lease was obtained. */
  acquire(slot: string, key: string, factory: KernelFactory<K>, opts?: EnsureOptions<K>): Promise<AcquireResult<K>>;
  /** See `KernelSupervisor.ensure`: the live same-key kernel, else a spare or a newly built one (build first). */
  ensure(slot: string, key: string, factory: KernelFactory<K>, opts?: EnsureOptions<K>): Promise<Lease<K>>;
  /** The slot's current lease; answers at once. */
  lease(slot: string): Lease<K> | undefined;
  /** True while `lease` is the slot's current lease. */
  isCurrent(lease: Lease<K>): boolean;
  /** The slot's state; answers at once. */
  status(slot: string): SlotStatus;
  /** The names of every slot the supervisor has seen. */
  slots(): string[];
  /** Interrupts the current kernel of `slot` (or of every slot); resolves with how many were delivered. */
  interrupt(slot?: string, opts?: WaitOptions): Promise<number>;
  /** Interrupts the kernel only while `lease` is current. */
  interruptIfCurrent(lease: Lease<K>, opts?: WaitOptions): Promise<boolean>;
  /** Hard-stops the kernel only while `lease` is current. */
  killIfCurrent(lease: Lease<K>, opts?: WaitOptions): Promise<boolean>;
  /** Restarts the kernel only while `lease` is current; the new lease, or `undefined` for a stale one. */
  restartIfCurrent(lease: Lease<K>, opts?: WaitOptions & { alreadyRestarted?: boolean }): Promise<Lease<K> | undefined>;
  /** Empties the slot and shuts the kernel down, only while `lease` is current. */
  shutdownIfCurrent(lease: Lease<K>, reason?: EndedReason, opts?: WaitOptions): Promise<boolean>;
  /** Stops `slot` (or every slot): cancels its builds, empties it and shuts its kernel down. */
  stop(slot?: string, opts?: StopOptions): Promise<number>;
  /** Keeps `slot` from idle expiry until released. */
  hold(slot: string): SlotHold;
  /** Records activity on `slot` now. */
  touch(slot: string): void;
}
