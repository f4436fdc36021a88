import { randomUUID } from 'node:crypto';
import { type ExecuteOptions, type ExecuteResult, type InputRequest, onAbort } from '@kernelwarden/core';
import { type CellExecutor, type CellRunRequest, type Lease, NoKernelError } from '@kernelwarden/supervisor';
import { CellBudget } from './budget.js';
import {
  CellTimeoutAbandonedError,
  CellTimeoutBootstrapFailedError,
  CellTimeoutError,
  CellTimeoutLeaseReplacedError,
  CellTimeoutRestartFailedError,
} from './cell-timeout-error.js';
import {
  type EscalationReason,
  type Unsubscribe,
  type WatchdogEvent,
  WatchdogEvents,
  type WatchdogEventType,
  type WatchdogListener,
} from './events.js';
import { type ResolvedWatchdogPolicy, resolveWatchdogPolicy, type WatchdogPolicy } from './policy.js';

/**
 * A cell executor that bounds every cell with a budget and, when the budget runs out or the caller aborts, climbs
 * the escalation ladder on the exact lease the cell ran on: interrupt → grace → kill → grace → restart (generation
 * + 1, same kernel) → bootstrap → `CellTimeoutError`.
 *
 * Plug it into a `KernelSession` (`executor: createWatchdog()`), or call `run()` directly with a supervisor.
 */
export interface Watchdog extends CellExecutor {
  /** The policy in force, with defaults applied. */
  readonly policy: ResolvedWatchdogPolicy;
  /**
   * Runs one cell on `req.lease`, else on the slot's current lease, and resolves with its result — also when an
   * interrupt stopped it (then `timedOut` or `cancelled` is true and the kernel's variables survive). Rejects with a
   * `CellTimeoutError` (or a variant) when the kernel had to be killed after a timeout, with the signal's reason when
   * it had to be killed after the caller aborted, and with the kernel's own error when `execute` rejected.
   *
   * When `req.stopSignal` aborts (the session stops or closes and shuts the kernel down itself), the watch ends at
   * once — before or in the middle of the ladder — without a rung of its own: it resolves with the cell's result
   * (`cancelled: true`) if the cell already answered, else rejects with `req.signal`'s reason.
   */
  run(req: CellRunRequest): Promise<ExecuteResult>;
  /** Calls `listener` after every rung of type `type` (`'*'`: every rung) of every cell; returns the remover. */
  on(type: WatchdogEventType | '*', listener: WatchdogListener): Unsubscribe;
}

/**
 * Creates a watchdog. The policy is validated at once (`InvalidOptionsError` naming the field), and
 * `KERNELWARDEN_CELL_TIMEOUT` is read by this call when `cellTimeoutMs` is absent.
 *
 * Use one watchdog per session (or per process): it holds no state between cells besides its listeners.
 */
export function createWatchdog(policy?: WatchdogPolicy): Watchdog {
  const resolved = resolveWatchdogPolicy(policy);
  const events = new WatchdogEvents();
  return {
    policy: resolved,
    run: (req) => new CellWatch(req, resolved, events).run(),
    on: (type, listener) => events.on(type, listener),
  };
}

type Settled = { ok: true; value: ExecuteResult } | { ok: false; error: unknown };

/** What a wait that a session stop broke off resolves with. */
const STOPPED = Symbol('stopped');

/** One cell under watch: its execution, its budget and, if needed, its escalation. */
class CellWatch {
  readonly #req: CellRunRequest;
  readonly #policy: ResolvedWatchdogPolicy;
  readonly #events: WatchdogEvents;
  readonly #cellId: string;
  #settled: Settled | undefined;
  /** Resolves when the session stops: every wait of the ladder races it. */
  readonly #stopped: Promise<typeof STOPPED>;
  #stop!: () => void;

  constructor(req: CellRunRequest, policy: ResolvedWatchdogPolicy, events: WatchdogEvents) {
    this.#req = req;
    this.#policy = policy;
    this.#events = events;
    this.#cellId = req.cellId ?? randomUUID();
    this.#stopped = new Promise((resolve) => {
      this.#stop = () => resolve(STOPPED);
    });
  }

  get #stopping(): boolean {
    return this.#req.stopSignal?.aborted === true;
  }

  async run(): Promise<ExecuteResult> {
    const { supervisor, slot, signal, stopSignal, code } = this.#req;
    stopSignal?.throwIfAborted();
    signal?.throwIfAborted();
    const lease = this.#req.lease ?? supervisor.lease(slot);
    if (!lease) throw new NoKernelError(slot);
    const kernel = lease.kernel;
    if (typeof kernel.execute !== 'function') throw new NoKernelError(slot, 'kernel has no execute()');

    // Keeps the slot from idle expiry while the cell runs, also when the watchdog is used without a session.
    const hold = supervisor.hold(slot);
    let trip!: (reason: EscalationReason) => void;
    const tripped = new Promise<EscalationReason>((resolve) => {
      trip = resolve;
    });
    const budget = new CellBudget(this.#policy.clock, this.#policy.cellTimeoutMs, () => trip('timeout'));
    // A stop aborts stopSignal just before signal: it is the session's to handle, not a caller's cancellation.
    // One listener per signal however many cells share it (core's `onAbort`): no MaxListenersExceededWarning.
    const offAbort = signal ? onAbort(signal, () => (this.#stopping ? this.#stop() : trip('cancelled'))) : undefined;
    const offStop = stopSignal ? onAbort(stopSignal, () => this.#stop()) : undefined;

    const userOnInput = this.#req.onInput;
    const options: ExecuteOptions = {
      cellId: this.#cellId,
      ...(this.#req.origin === undefined ? {} : { origin: this.#req.origin }),
      ...(this.#req.onOutput === undefined ? {} : { onOutput: this.#req.onOutput }),
      ...(userOnInput === undefined
        ? {}
        : {
            // Waiting for the user's answer is not the cell's time: the budget stands still until it arrives.
            onInput: async (request: InputRequest) => {
              budget.pause();
              try {
                return await userOnInput(request);
              } finally {
                budget.resume();
              }
            },
          }),
    };
    // No signal goes to the kernel: aborting one would make it interrupt and settle at once, taking the grace
    // periods out of the watchdog's hands.
    const execution = (async () => kernel.execute!(code, options))().then(
      (value): Settled => (this.#settled = { ok: true, value }),
      (error: unknown): Settled => (this.#settled = { ok: false, error }),
    );

    budget.start();
    try {
      const first = await Promise.race([execution, tripped, this.#stopped]);
      if (first === STOPPED) return this.#release(undefined);
      if (typeof first !== 'string') return this.#finish(first, undefined);
      return await this.#escalate(lease, first, execution);
    } finally {
      budget.dispose();
      offAbort?.();
      offStop?.();
      hold.release();
    }
  }

  /**
   * Ends the watch for a session stop: the session interrupted the kernel and shuts it down itself, so no rung is
   * taken. The cell's own answer stands if it came; else the cell is cancelled.
   */
  #release(reason: EscalationReason | undefined): ExecuteResult {
    if (this.#settled?.ok) {
      const result = this.#settled.value;
      return { ...result, cancelled: true, ...(reason === 'timeout' ? { timedOut: true } : {}) };
    }
    throw this.#req.signal?.aborted ? this.#req.signal.reason : this.#req.stopSignal?.reason;
  }

  /** Waits for `promise`, or until the session stops. */
  #unlessStopped<T>(promise: Promise<T>): Promise<T | typeof STOPPED> {
    return Promise.race([promise, this.#stopped]);
  }

  /**
   * Climbs the escalation ladder on `lease` for `reason`: interrupt, kill, restart, bootstrap. Resolves with the cell's
   * result when a rung settles it (or a session stop ends the watch), else rejects with the rung's failure.
   */
  async #escalate(lease: Lease<any>, reason: EscalationReason, execution: Promise<Settled>): Promise<ExecuteResult> {
    if (this.#settled) return this.#finish(this.#settled, reason);
    // A session stop breaks the ladder off between and during its rungs: the kernel is about to be shut down, so
    // killing, restarting or bootstrapping it would only delay the stop.
    const interrupted = await this.#interrupt(lease, reason, execution);
    if (interrupted) return interrupted;
    const kill = await this.#kill(lease, reason, execution);
    if ('result' in kill) return kill.result;
    const restart = await this.#restart(lease, reason, kill.freshAfterKill);
    if ('result' in restart) return restart.result;
    const stopped = await this.#bootstrap(lease, reason, restart.restarted);
    if (stopped) return stopped;
    throw this.#failure(reason, lease, CellTimeoutError);
  }

  /**
   * The interrupt rung; resolves with the cell's result when it ends the ladder. The grace starts when the interrupt
   * is sent, so a slow interrupt request eats into it rather than extending it. An undelivered interrupt (a failed
   * request) still gets its grace: the cell may finish on its own, and the contract promises the kernel that much time
   * before a kill. Only a lease that is no longer current skips it, since no step can act on it any more.
   */
  async #interrupt(
    lease: Lease<any>,
    reason: EscalationReason,
    execution: Promise<Settled>,
  ): Promise<ExecuteResult | undefined> {
    const { supervisor } = this.#req;
    const interruptGrace = this.#grace(this.#policy.interruptGraceMs);
    try {
      const delivered = await this.#unlessStopped(
        Promise.race([attempt(() => supervisor.interruptIfCurrent(lease)), interruptGrace.elapsed.then(() => false)]),
      );
      if (delivered === STOPPED) return this.#release(reason);
      this.#emit('interrupt', reason, lease, delivered);
      if (!this.#settled && (delivered || supervisor.isCurrent(lease))) {
        await this.#unlessStopped(Promise.race([execution, interruptGrace.elapsed]));
      }
    } finally {
      interruptGrace.cancel();
    }
    if (this.#stopping) return this.#release(reason);
    if (this.#settled) return this.#finish(this.#settled, reason);
    return undefined;
  }

  /**
   * The kill rung: resolves with the cell's result when it ends the ladder, else with whether the kill already left a
   * fresh interpreter; rejects when the kernel had to be given up. The kill grace bounds how long the cell may take to
   * settle once the kill is sent; the kill request itself may go on up to killTimeoutMs (a gateway kernel's kill is a
   * server-side restart that takes seconds).
   */
  async #kill(
    lease: Lease<any>,
    reason: EscalationReason,
    execution: Promise<Settled>,
  ): Promise<{ result: ExecuteResult } | { freshAfterKill: boolean }> {
    const { supervisor } = this.#req;
    const killGrace = this.#grace(this.#policy.killGraceMs);
    const killTimeout = this.#grace(this.#policy.killTimeoutMs);
    let killed: boolean | undefined;
    let freshAfterKill = false;
    try {
      const killing = killIfCurrent(supervisor, lease).then((outcome) => {
        killed = outcome.acted;
        freshAfterKill = outcome.restarted;
      });
      if (!this.#settled) await this.#unlessStopped(Promise.race([execution, killGrace.elapsed]));
      if (this.#settled && !this.#stopping) await this.#unlessStopped(Promise.race([killing, killTimeout.elapsed]));
    } finally {
      killGrace.cancel();
      killTimeout.cancel();
    }
    this.#emit('kill', reason, lease, killed === true);
    if (this.#stopping) return { result: this.#release(reason) };
    if (!this.#settled || killed === undefined) {
      // Still stuck (or the kill itself hangs): give the lease up; the next ensure builds a fresh kernel.
      const abandoned = await attempt(() => supervisor.shutdownIfCurrent(lease, 'watchdog_abandoned'));
      this.#emit('abandon', reason, lease, abandoned);
      throw this.#failure(reason, lease, abandoned ? CellTimeoutAbandonedError : CellTimeoutLeaseReplacedError);
    }
    // Nothing was killed (a stale lease, or a kernel the supervisor could not kill): the cell's own answer stands.
    if (!killed) return { result: this.#finish(this.#settled, reason) };
    return { freshAfterKill };
  }

  /**
   * The restart rung: resolves with the next generation's lease, or with the cell's result when a session stop ends
   * the watch; rejects when the restart failed or the lease was replaced. A kill that already left a fresh interpreter
   * (a Jupyter server's kill is a restart) needs no second restart: only the next generation is published. Any other
   * kill is followed by the kernel's own restart.
   */
  async #restart(
    lease: Lease<any>,
    reason: EscalationReason,
    freshAfterKill: boolean,
  ): Promise<{ result: ExecuteResult } | { restarted: Lease<any> }> {
    const { supervisor } = this.#req;
    let restarted: Lease<any> | undefined;
    try {
      const outcome = await this.#unlessStopped(
        supervisor.restartIfCurrent(lease, freshAfterKill ? { alreadyRestarted: true } : {}),
      );
      if (outcome === STOPPED) return { result: this.#release(reason) };
      restarted = outcome;
    } catch (error) {
      this.#emit('restart', reason, lease, false, { error });
      await attempt(() => supervisor.shutdownIfCurrent(lease, 'watchdog_restart_failed'));
      throw this.#failure(reason, lease, CellTimeoutRestartFailedError, error);
    }
    this.#emit(
      'restart',
      reason,
      lease,
      restarted !== undefined,
      restarted ? { replacement: { leaseId: restarted.id, generation: restarted.generation } } : {},
    );
    if (!restarted) throw this.#failure(reason, lease, CellTimeoutLeaseReplacedError);
    return { restarted };
  }

  /**
   * The bootstrap rung on the restarted lease: resolves with the cell's result when a session stop ends the watch,
   * else with nothing; rejects when the bootstrap failed.
   */
  async #bootstrap(
    lease: Lease<any>,
    reason: EscalationReason,
    restarted: Lease<any>,
  ): Promise<ExecuteResult | undefined> {
    const { supervisor, bootstrap } = this.#req;
    if (this.#stopping) return this.#release(reason);
    if (!bootstrap) return undefined;
    try {
      if ((await this.#unlessStopped(bootstrap(restarted))) === STOPPED) return this.#release(reason);
    } catch (error) {
      if (this.#stopping) return this.#release(reason);
      this.#emit('bootstrap', reason, restarted, false, { error });
      await attempt(() => supervisor.shutdownIfCurrent(restarted, 'bootstrap_failed'));
      throw this.#failure(reason, lease, CellTimeoutBootstrapFailedError, error);
    }
    this.#emit('bootstrap', reason, restarted, true);
    return undefined;
  }

  /** A grace period on the watchdog's clock: `elapsed` resolves when it ends; `0` ends at once. */
  #grace(ms: number): { elapsed: Promise<void>; cancel(): void } {
    if (ms <= 0) return { elapsed: Promise.resolve(), cancel: () => {} };
    let timer: { cancel(): void } | undefined;
    const elapsed = new Promise<void>((resolve) => {
      timer = this.#policy.clock.setTimer(resolve, ms);
    });
    return { elapsed, cancel: () => timer?.cancel() };
  }

  #finish(settled: Settled, reason: EscalationReason | undefined): ExecuteResult {
    if (!settled.ok) throw settled.error;
    const result = settled.value;
    if (reason === undefined) return result;
    return reason === 'timeout' ? { ...result, timedOut: true } : { ...result, cancelled: true };
  }

  #failure(
    reason: EscalationReason,
    lease: Lease<any>,
    Kind: new (details: ConstructorParameters<typeof CellTimeoutError>[0]) => CellTimeoutError,
    cause?: unknown,
  ): unknown {
    // A caller's abort rejects with the caller's own reason; the events tell what the kernel went through.
    if (reason === 'cancelled') return this.#req.signal?.reason;
    return new Kind({
      timeoutMs: this.#policy.cellTimeoutMs ?? 0,
      slot: this.#req.slot,
      cellId: this.#cellId,
      leaseId: lease.id,
      generation: lease.generation,
      ...(cause === undefined ? {} : { cause }),
    });
  }

  #emit(
    type: WatchdogEventType,
    reason: EscalationReason,
    lease: Lease<any>,
    acted: boolean,
    extra: Pick<WatchdogEvent, 'replacement' | 'error'> = {},
  ): void {
    this.#events.emit({
      type,
      reason,
      slot: this.#req.slot,
      cellId: this.#cellId,
      ...(this.#req.origin === undefined ? {} : { origin: this.#req.origin }),
      leaseId: lease.id,
      generation: lease.generation,
      acted,
      ...extra,
      at: this.#policy.clock.now(),
    });
  }
}

/**
 * Kills the kernel only while `lease` is current, and says whether it did and whether the kill already restarted
 * the interpreter (`KillOutcome.restarted`); a kill that throws counts as not performed.
 */
async function killIfCurrent(
  supervisor: CellRunRequest['supervisor'],
  lease: Lease<any>,
): Promise<{ acted: boolean; restarted: boolean }> {
  const kernel = lease.kernel;
  if (!supervisor.isCurrent(lease) || typeof kernel.kill !== 'function') return { acted: false, restarted: false };
  try {
    const outcome = await kernel.kill();
    return { acted: true, restarted: outcome?.restarted === true };
  } catch {
    return { acted: false, restarted: false };
  }
}

/** Runs one supervisor step; a step that throws counts as not performed. */
async function attempt(step: () => boolean | Promise<boolean>): Promise<boolean> {
  try {
    return (await step()) === true;
  } catch {
    return false;
  }
}
