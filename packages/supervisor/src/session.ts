import {
  type Clock,
  type EventMapOf,
  type ExecuteOptions,
  type ExecuteResult,
  emptyResult,
  InvalidOptionsError,
  type ReadIsolationPolicy,
  raceSignal,
  TypedEmitter,
} from '@kernelwarden/core';
import { BackgroundCells, type BackgroundPeek } from './background.js';
import { BootstrapError, ClosedError, SessionStoppedError } from './errors.js';
import type { Unsubscribe } from './events.js';
import { type CellExecutor, plainExecutor } from './executor.js';
import type { LanguageSlot, LanguageSlotContext } from './language-slot.js';
import type { Lease, SlotStatus, SupervisedKernel } from './lease.js';
import { isAlive } from './pool.js';
import { validateSessionOptions } from './session-options.js';
import { type AcquireResult, KernelSupervisor } from './supervisor.js';
import { TurnBarrier } from './turn-barrier.js';

/** The supervisor slot that holds a session's Python kernel. */
export const PYTHON_SLOT = 'python';

/**
 * What a session's kernel factory is told: which slot and environment the kernel is for, the session's working
 * directory and read-isolation policy (pass both to every kernel you start), why it is built, a signal that aborts
 * when the kernel is no longer wanted, and the session's host-side state.
 */
export interface SlotFactoryContext<H = unknown> {
  slot: string;
  /** The environment name (the session's `env`, or the one `setEnv` asked for); `undefined` means the default. */
  env: string | undefined;
  cwd?: string;
  readIsolation?: ReadIsolationPolicy;
  /** `'main'`: the session's slot kernel; `'background'`: a background cell's own kernel; `'pool'`: a warm spare. */
  purpose: 'main' | 'background' | 'pool';
  signal: AbortSignal;
  /** The session's host-side state (`session.host`): made once per session, the same object for every kernel. */
  host: H;
}

/** Builds one kernel for a session. Start it in `ctx.cwd` under `ctx.readIsolation`, honour `ctx.signal`. */
export type SlotFactory<K extends SupervisedKernel, H = unknown> = (ctx: SlotFactoryContext<H>) => K | Promise<K>;

/**
 * What a session's `bootstrap` is told besides the lease.
 *
 * The lease is the published one (its real generation) for a kernel started where none was running, and after a
 * restart. A kernel that is not published yet gets a provisional lease with `generation: -1` — a warm spare, and the
 * replacement of an environment switch, which is bootstrapped before it is swapped in — so exact-lease operations
 * on it do nothing: use `lease.kernel` itself.
 */
export interface BootstrapContext<H = unknown> {
  /** Aborts when the kernel is no longer wanted: the session stops or closes, or the switch was given up. */
  signal: AbortSignal;
  host: H;
  /** `'main'` for a kernel of the slot (a new generation, or a switch's replacement); `'pool'` for a warm spare. */
  purpose: 'main' | 'pool';
}

/** Options of `new KernelSession()`. */
export interface KernelSessionOptions<K extends SupervisedKernel, H = unknown> {
  /** Builds the session's Python kernels: main, background and pooled. */
  python: SlotFactory<K, H>;
  /** The R slot (`createRSlot()` from `@kernelwarden/r-kernel`), or any other `LanguageSlot`. */
  r?: LanguageSlot;
  /** The initial Python environment name. @defaultValue undefined (the factory's default) */
  env?: string;
  /** The initial R environment name, handed to the R slot. @defaultValue undefined */
  rEnv?: string;
  /** The working directory handed to every factory. */
  cwd?: string;
  /** Handed to every kernel the session creates — main, background, pooled and R. */
  readIsolation?: ReadIsolationPolicy;
  /**
   * Runs on every new Python kernel, outside every lock (`interrupt` and `status` answer while it runs): after it is
   * published when no kernel was running (so `interrupt('python')` reaches it), and before it is swapped in for an
   * environment switch (so the old kernel keeps serving until the new one is ready). A bootstrap that throws shuts
   * that kernel down and fails the call that needed it; a failed switch leaves the old kernel in place.
   */
  bootstrap?: (lease: Lease<K>, ctx: BootstrapContext<H>) => void | Promise<void>;
  /** Runs each cell; the watchdog (`createWatchdog()`) plugs in here. @defaultValue plainExecutor */
  executor?: CellExecutor;
  /**
   * Makes the session's host-side state, once, on first use. It survives stop, start, setEnv, restarts and worker
   * deaths, and every factory sees it as `ctx.host`. @defaultValue `() => ({})`
   */
  createHost?: () => H;
  /** Keeps `size` started, bootstrapped Python kernels for the current environment. @defaultValue no pool */
  pool?: { size: number };
  /** Shut a slot down after this long unused (`state: 'ended', endedReason: 'idle_ttl'`). `0` disables. @defaultValue 0 */
  idleTtlMs?: number;
  /** Drives the idle timers. @defaultValue systemClock */
  clock?: Clock;
  /** Most background cells running at once. @defaultValue 16 */
  maxBackground?: number;
  /** Most characters of stdout/stderr a background peek keeps. @defaultValue 1_000_000 */
  maxPeekChars?: number;
}

/** Options of `KernelSession.execute()`. */
export interface SessionExecuteOptions extends Pick<ExecuteOptions, 'cellId' | 'origin' | 'onOutput' | 'onInput'> {
  /** Which slot runs the cell. @defaultValue 'python' */
  language?: 'python' | 'r';
  /** Cancels the cell (or its wait for the turn): it settles with `cancelled: true`. */
  signal?: AbortSignal;
}

/** The statuses of a `kernel_status` event. */
export type KernelStatus = 'started' | 'stopped' | 'restarted' | 'env_changed' | 'ended';

/** Events of a `KernelSession`. */
export interface KernelStatusEvent {
  type: 'kernel_status';
  status: KernelStatus;
  /** The slot concerned (`'python'`, or the R slot's language for its idle expiry). */
  slot: string;
  /** The slot's generation after the change. */
  generation: number;
  /** The current lease's id, when there is one. */
  leaseId?: string;
  /** The active Python environment after the change. */
  env?: string;
  /** Why the kernel ended, for `stopped` and `ended`. */
  endedReason?: string;
}

/** `KernelSession.status()`: the Python slot's status plus the session's own state. */
export interface SessionStatus extends SlotStatus {
  /** The environment the current (or next) Python kernel runs in. */
  env: string | undefined;
  /** The environment asked for last; differs from `env` after a failed `setEnv`. */
  desiredEnv: string | undefined;
  /** True while a stop is in progress or after it, until the next `start()` or `execute()`. */
  cancelled: boolean;
  /** A stop is in progress. */
  stopping: boolean;
  /** An execution or lifecycle step holds the turn barrier. */
  turnRunning: boolean;
  /** `close()` was called. */
  closed: boolean;
  /** Background cells still running. */
  backgroundRunning: number;
  /** The R slot's own status, when the session has one. */
  r?: unknown;
}

type Ticket = { release: () => void } | 'cancelled';

/**
 * The abort signals of the turn that holds the barrier: `signal` aborts on the caller's abort and on a stop or
 * close; `stop` only on a stop or close, and just before `signal`.
 */
interface Turn {
  controller: AbortController;
  stop: AbortController;
  signal: AbortSignal;
}

const STOP_REASON = 'manual_stop';

/**
 * One conversation's kernels: a Python slot (and optionally R) behind a turn barrier, with stop/start intents that
 * cannot overtake each other, build-first environment switches, bootstrap after every new generation, background
 * cells on their own kernels, and `kernel_status` events.
 *
 * Create one per conversation; `close()` it (or `await using`) when the conversation ends.
 */
export class KernelSession<K extends SupervisedKernel = SupervisedKernel, H = unknown> {
  readonly #supervisor: KernelSupervisor<K>;
  readonly #factory: SlotFactory<K, H>;
  readonly #r: LanguageSlot | undefined;
  readonly #bootstrapFn: KernelSessionOptions<K, H>['bootstrap'];
  readonly #executor: CellExecutor;
  readonly #createHost: () => H;
  readonly #poolSize: number;
  readonly #cwd: string | undefined;
  readonly #readIsolation: ReadIsolationPolicy | undefined;
  readonly #barrier = new TurnBarrier();
  readonly #events = new TypedEmitter<EventMapOf<KernelStatusEvent>>();
  readonly #background: BackgroundCells;
  #host: { value: H } | undefined;
  #desiredEnv: string | undefined;
  #activeEnv: string | undefined;
  #rEnv: string | undefined;
  #stopEpoch = 0;
  #stopping: Promise<void> | undefined;
  #cancelled = false;
  #turn: Turn | undefined;
  #closing: Promise<void> | undefined;
  #closed = false;

  constructor(opts: KernelSessionOptions<K, H>) {
    validateSessionOptions(opts);
    this.#supervisor = new KernelSupervisor<K>({
      ...(opts.idleTtlMs !== undefined ? { idleTtlMs: opts.idleTtlMs } : {}),
      ...(opts.clock ? { clock: opts.clock } : {}),
    });
    this.#factory = opts.python;
    this.#r = opts.r;
    this.#bootstrapFn = opts.bootstrap;
    this.#executor = opts.executor ?? plainExecutor;
    this.#createHost = opts.createHost ?? (() => ({}) as H);
    this.#poolSize = opts.pool?.size ?? 0;
    this.#cwd = opts.cwd;
    this.#readIsolation = opts.readIsolation;
    this.#desiredEnv = opts.env;
    this.#activeEnv = opts.env;
    this.#rEnv = opts.rEnv;
    this.#background = new BackgroundCells({
      maxActive: opts.maxBackground ?? 16,
      maxPeekChars: opts.maxPeekChars ?? 1_000_000,
    });
    this.#supervisor.on('restarted', (event) => {
      if (event.slot === PYTHON_SLOT) this.#emit('restarted', PYTHON_SLOT);
    });
    this.#supervisor.on('ended', (event) => {
      if (event.reason === 'idle_ttl') this.#emit('ended', event.slot, 'idle_ttl');
    });
    this.#configurePool();
  }

  /** The session's supervisor: its Python slot is `'python'`; the R slot keeps its kernel here too. */
  get supervisor(): KernelSupervisor<K> {
    return this.#supervisor;
  }

  /** The session's host-side state, made once by `createHost` on first use and never rebuilt. */
  get host(): H {
    this.#host ??= { value: this.#createHost() };
    return this.#host.value;
  }

  /** True from a `stop()` until the next `start()` or `execute()` enters its turn. */
  get cancelled(): boolean {
    return this.#cancelled;
  }

  /** Listens to `kernel_status` events; returns the function that stops listening. */
  on(type: 'kernel_status', listener: (event: KernelStatusEvent) => void): Unsubscribe {
    return this.#events.on(type, listener);
  }

  /**
   * Runs one cell under the turn barrier, on the live Python kernel (starting one, with bootstrap, when there is
   * none) or on the R slot. A cell cancelled by `stop()`, `close()` or its own signal settles with
   * `cancelled: true`; an R slot that cannot start resolves with an `RKernelUnavailable` error result.
   */
  async execute(code: string, opts: SessionExecuteOptions = {}): Promise<ExecuteResult> {
    if (typeof code !== 'string') throw invalid('code', 'expected a string');
    const language = opts.language ?? 'python';
    if (language !== 'python' && language !== 'r') throw invalid('language', "expected 'python' or 'r'");
    if (language === 'r' && !this.#r) throw invalid('language', 'this session has no R slot (options.r)');
    let ticket: Ticket;
    try {
      ticket = await this.#admit(opts.signal);
    } catch (error) {
      if (opts.signal?.aborted && error === opts.signal.reason) return cancelledResult(opts.cellId);
      throw error;
    }
    if (ticket === 'cancelled') return cancelledResult(opts.cellId);
    const turn = this.#beginTurn(opts.signal);
    this.#cancelled = false;
    try {
      if (language === 'r') return await this.#executeR(code, opts, turn);
      const hold = this.#supervisor.hold(PYTHON_SLOT);
      try {
        const lease = await this.#ensurePython(turn.signal, 'started');
        return await this.#executor.run({
          supervisor: this.#supervisor,
          slot: PYTHON_SLOT,
          code,
          lease,
          signal: turn.signal,
          stopSignal: turn.stop.signal,
          // After an executor reset the kernel (the watchdog's restart), it must be bootstrapped whether or not the
          // caller gave up on the cell: only a stop or close cancels that.
          bootstrap: (next) => this.#bootstrap(next as Lease<K>, turn.stop.signal),
          ...pick(opts),
        });
      } finally {
        hold.release();
      }
    } catch (error) {
      if (turn.signal.aborted && error === turn.signal.reason) return cancelledResult(opts.cellId);
      throw error;
    } finally {
      this.#endTurn(turn);
      ticket.release();
    }
  }

  /**
   * Starts the Python kernel if it is not running (with bootstrap) and emits `kernel_status: started`. A start
   * issued while a stop is in progress waits for that stop, so the events are always `stopped` then `started`;
   * it clears the cancelled state. Rejects with `SessionStoppedError` when a stop issued after it wins.
   */
  async start(opts: { signal?: AbortSignal } = {}): Promise<SessionStatus> {
    const ticket = await this.#admit(opts.signal);
    if (ticket === 'cancelled') throw new SessionStoppedError('start()');
    const turn = this.#beginTurn(opts.signal);
    this.#cancelled = false;
    try {
      await this.#ensurePython(turn.signal, null);
      this.#emit('started', PYTHON_SLOT);
      return this.status();
    } catch (error) {
      throw this.#lifecycleError(error, turn, opts.signal, 'start()');
    } finally {
      this.#endTurn(turn);
      ticket.release();
    }
  }

  /**
   * Stops the session: interrupts every slot once and cancels the running turn, waits for it to leave the barrier,
   * shuts the kernels down and emits `kernel_status: stopped`. Everything issued before the stop that has not
   * finished — cells, `start()`, `setEnv()`, `restart()`, also those issued during an earlier stop still in progress —
   * is cancelled and never runs; so when the stop resolves the session is stopped, and it stays cancelled until the
   * next `start()` or `execute()`. A stop issued during another joins it. Aborting `signal` only stops waiting: the
   * stop itself always runs to its end.
   */
  stop(opts: { signal?: AbortSignal } = {}): Promise<void> {
    if (opts.signal) return raceSignal(this.stop(), opts.signal);
    if (this.#closed || this.#closing) return this.#closing ?? Promise.resolve();
    // Every stop is a new intent, also one that joins a stop in progress: work issued before it is cancelled.
    this.#stopEpoch += 1;
    this.#cancelled = true;
    if (this.#stopping) return this.#stopping;
    // Interrupt first (recorded before the turn's own abort), then cancel the turn so it leaves the barrier.
    const interrupted = this.#supervisor.interrupt();
    this.#abortTurn(stopReason('The session was stopped'));
    const stopping = this.#runStop(interrupted).finally(() => {
      this.#stopping = undefined;
    });
    this.#stopping = stopping;
    return stopping;
  }

  /**
   * Switches the Python environment. With a live kernel in another environment it builds and bootstraps the
   * replacement first, and only then swaps it in (generation + 1) and shuts the old one down; until then the old
   * kernel keeps its lease, environment and generation. A build or bootstrap that fails rejects and leaves all of
   * them as they were, but remembers `name` as desired (the next kernel built after a stop uses it). Without a live
   * kernel it only records the choice. Emits `env_changed`.
   */
  async setEnv(name: string, opts: { signal?: AbortSignal } = {}): Promise<SessionStatus> {
    if (typeof name !== 'string' || name.length === 0) throw invalid('name', 'expected a non-empty string');
    const ticket = await this.#admit(opts.signal);
    if (ticket === 'cancelled') throw new SessionStoppedError('setEnv()');
    const turn = this.#beginTurn(opts.signal);
    try {
      this.#desiredEnv = name;
      const current = this.#supervisor.lease(PYTHON_SLOT);
      if (current && isAlive(current.kernel)) {
        if (this.#activeEnv !== name || current.key !== envKey(name)) {
          await this.#ensurePython(turn.signal, null, name);
        }
      } else if (this.#activeEnv !== name) {
        this.#activeEnv = name;
        this.#configurePool();
      }
      this.#emit('env_changed', PYTHON_SLOT);
      return this.status();
    } catch (error) {
      throw this.#lifecycleError(error, turn, opts.signal, 'setEnv()');
    } finally {
      this.#endTurn(turn);
      ticket.release();
    }
  }

  /** Records the R environment; the R slot replaces its kernel lazily, on the next R cell. */
  setREnv(name: string | undefined): void {
    if (name !== undefined && (typeof name !== 'string' || name.length === 0)) {
      throw invalid('name', 'expected a non-empty string or undefined');
    }
    this.#rEnv = name;
  }

  /**
   * Restarts the Python kernel in place (same kernel, fresh interpreter, generation + 1) and re-runs bootstrap;
   * starts one when there is none. Emits `kernel_status: restarted`.
   */
  async restart(opts: { signal?: AbortSignal } = {}): Promise<SessionStatus> {
    const ticket = await this.#admit(opts.signal);
    if (ticket === 'cancelled') throw new SessionStoppedError('restart()');
    const turn = this.#beginTurn(opts.signal);
    this.#cancelled = false;
    try {
      const current = this.#supervisor.lease(PYTHON_SLOT);
      const restarted =
        current && isAlive(current.kernel)
          ? await this.#supervisor.restartIfCurrent(current, { signal: turn.signal })
          : undefined;
      if (restarted) await this.#bootstrap(restarted, turn.signal);
      else {
        await this.#ensurePython(turn.signal, null);
        this.#emit('restarted', PYTHON_SLOT);
      }
      return this.status();
    } catch (error) {
      throw this.#lifecycleError(error, turn, opts.signal, 'restart()');
    } finally {
      this.#endTurn(turn);
      ticket.release();
    }
  }

  /**
   * Starts `code` on a kernel of its own — made by the session's factory with the active environment, working
   * directory and read-isolation policy — without the turn barrier and without touching the session's lease. The
   * kernel is shut down when the cell ends. Can be the session's very first action.
   */
  runBackground(code: string, opts: { cellId?: string; origin?: string } = {}): { execId: string } {
    if (typeof code !== 'string') throw invalid('code', 'expected a string');
    if (this.#closed || this.#closing) throw new ClosedError('session');
    const env = this.#activeEnv;
    return this.#background.start(
      code,
      async (signal) => await this.#factory(this.#context('background', env, signal)),
      opts,
    );
  }

  /** What a background cell has done so far. Throws `BackgroundCellError` (`BACKGROUND_NOT_FOUND`) for an unknown id. */
  peekBackground(execId: string): BackgroundPeek {
    return this.#background.peek(execId);
  }

  /** Resolves with the final peek once the background cell ended; aborting `signal` stops waiting. */
  waitBackground(execId: string, opts: { signal?: AbortSignal } = {}): Promise<BackgroundPeek> {
    return raceSignal(this.#background.wait(execId), opts.signal);
  }

  /** Interrupts a background cell (its kernel is shut down); false when it had already ended. */
  interruptBackground(execId: string, opts: { signal?: AbortSignal } = {}): Promise<boolean> {
    return raceSignal(this.#background.interrupt(execId), opts.signal);
  }

  /** The Python slot's status plus the session's own state. Answers at once. */
  status(): SessionStatus {
    const slot = this.#supervisor.status(PYTHON_SLOT);
    const status: SessionStatus = {
      ...slot,
      env: this.#activeEnv,
      desiredEnv: this.#desiredEnv,
      cancelled: this.#cancelled,
      stopping: this.#stopping !== undefined,
      turnRunning: this.#barrier.busy,
      closed: this.#closed,
      backgroundRunning: this.#background.running,
    };
    if (this.#r) status.r = this.#r.status();
    return status;
  }

  /**
   * Ends the session: cancels the running turn, shuts down every kernel — slots, R, background cells and the warm
   * pool — waits until cancelled builds are shut down too, and emits `kernel_status: ended`
   * (`endedReason: 'session_closed'`). Idempotent. Aborting `signal` only stops waiting: the close runs to its end.
   */
  close(opts: { signal?: AbortSignal } = {}): Promise<void> {
    if (opts.signal) return raceSignal(this.close(), opts.signal);
    if (this.#closing) return this.#closing;
    this.#stopEpoch += 1;
    this.#cancelled = true;
    void this.#supervisor.interrupt();
    this.#abortTurn(stopReason('The session was closed'));
    this.#closing = this.#runClose();
    return this.#closing;
  }

  /** `close()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #runStop(interrupted: Promise<number>): Promise<void> {
    // The interrupts were sent synchronously by stop(); their delivery is not awaited, so a slow or hung interrupt
    // request cannot hold the stop back.
    interrupted.catch(() => undefined);
    const release = await this.#barrier.enter();
    try {
      if (this.#r) await this.#r.shutdown(STOP_REASON).catch(() => undefined);
      await this.#supervisor.stop(PYTHON_SLOT, { reason: STOP_REASON, manual: true });
      await this.#supervisor.stop(undefined, { reason: STOP_REASON, manual: true });
      this.#emit('stopped', PYTHON_SLOT, STOP_REASON);
    } finally {
      this.#cancelled = true;
      release();
    }
  }

  async #runClose(): Promise<void> {
    const background = this.#background.closeAll();
    if (this.#stopping) await this.#stopping.catch(() => undefined);
    const release = await this.#barrier.enter();
    try {
      if (this.#r) await this.#r.shutdown('session_closed').catch(() => undefined);
      await this.#supervisor.stop(PYTHON_SLOT, { reason: 'session_closed', manual: false });
      await this.#supervisor.stop(undefined, { reason: 'session_closed', manual: false });
      await this.#supervisor.shutdownAll();
      await background;
      await this.#supervisor.settled();
      this.#closed = true;
      this.#emit('ended', PYTHON_SLOT, 'session_closed');
    } finally {
      release();
    }
  }

  /**
   * Waits for the turn, honouring the stop intents: work issued during a stop waits for it; work issued before a
   * later stop is cancelled when it reaches the barrier (the last intent wins). The epoch is taken when the work is
   * issued — this runs synchronously up to its first `await` — so a stop that joins one in progress still cancels
   * what was issued between the two.
   */
  async #admit(signal: AbortSignal | undefined): Promise<Ticket> {
    const epoch = this.#stopEpoch;
    if (this.#closed || this.#closing) throw new ClosedError('session');
    while (this.#stopping) {
      await this.#stopping.catch(() => undefined);
      if (this.#closed || this.#closing) throw new ClosedError('session');
      signal?.throwIfAborted();
    }
    if (this.#stopEpoch !== epoch) return 'cancelled';
    const release = await this.#barrier.enter(signal);
    if (this.#closed || this.#closing) {
      release();
      throw new ClosedError('session');
    }
    if (this.#stopEpoch !== epoch) {
      release();
      return 'cancelled';
    }
    return { release };
  }

  #beginTurn(callerSignal: AbortSignal | undefined): Turn {
    const controller = new AbortController();
    const turn: Turn = { controller, stop: new AbortController(), signal: controller.signal };
    if (callerSignal?.aborted) controller.abort(callerSignal.reason);
    else if (callerSignal) {
      const onAbort = () => controller.abort(callerSignal.reason);
      callerSignal.addEventListener('abort', onAbort, { once: true });
      turnCleanups.set(turn, () => callerSignal.removeEventListener('abort', onAbort));
    }
    this.#turn = turn;
    return turn;
  }

  #endTurn(turn: Turn): void {
    turnCleanups.get(turn)?.();
    turnCleanups.delete(turn);
    if (this.#turn === turn) this.#turn = undefined;
  }

  /**
   * Cancels the running turn for a stop or close: its stop signal first, so an executor can tell a stop from a
   * caller's abort.
   */
  #abortTurn(reason: Error): void {
    this.#turn?.stop.abort(reason);
    this.#turn?.controller.abort(reason);
  }

  #lifecycleError(error: unknown, turn: Turn, caller: AbortSignal | undefined, what: string): unknown {
    if (!turn.signal.aborted || error !== turn.signal.reason) return error;
    if (caller?.aborted) return caller.reason;
    return this.#closing ? new ClosedError('session') : new SessionStoppedError(what);
  }

  /**
   * Makes sure the Python slot holds a live kernel: the live one whatever its environment, else one for `env`
   * (default: the desired environment). A new kernel is bootstrapped here, outside every lock: before it is
   * published when it replaces a live kernel (a switch: the old one serves until the new one is ready), after it
   * is published otherwise (so `interrupt('python')` reaches a blocked bootstrap).
   */
  async #ensurePython(signal: AbortSignal, emit: KernelStatus | null, switchTo?: string): Promise<Lease<K>> {
    const current = this.#supervisor.lease(PYTHON_SLOT);
    const live = current !== undefined && isAlive(current.kernel);
    const env = switchTo ?? (live ? envFromKey(current.key) : this.#desiredEnv);
    const key = envKey(env);
    let prepared = false;
    const prepare =
      live && current.key !== key && this.#bootstrapFn
        ? async (kernel: K, ctx: { signal: AbortSignal }) => {
            await this.#bootstrapProvisional(kernel, key, ctx.signal);
            prepared = true;
          }
        : undefined;
    const result: AcquireResult<K> = await this.#supervisor.acquire(
      PYTHON_SLOT,
      key,
      (ctx) => this.#factory(this.#context('main', env, ctx.signal)),
      prepare ? { signal, prepare } : { signal },
    );
    if (result.outcome === 'reused') return result.lease;
    const envChanged = this.#activeEnv !== env;
    this.#activeEnv = env;
    if (envChanged) this.#configurePool();
    if (result.outcome === 'built' && !prepared) await this.#bootstrap(result.lease, signal);
    if (emit) this.#emit(emit, PYTHON_SLOT);
    return result.lease;
  }

  /** Bootstraps a kernel that is not published yet (a switch's replacement), on a provisional lease. */
  async #bootstrapProvisional(kernel: K, key: string, signal: AbortSignal): Promise<void> {
    const provisional: Lease<K> = {
      slot: PYTHON_SLOT,
      key,
      generation: -1,
      id: `provisional-${globalThis.crypto.randomUUID()}`,
      kernel,
    };
    try {
      await this.#bootstrapFn!(provisional, { signal, host: this.host, purpose: 'main' });
    } catch (error) {
      if (signal.aborted && error === signal.reason) throw error;
      throw new BootstrapError(PYTHON_SLOT, error);
    }
  }

  async #bootstrap(lease: Lease<K>, signal: AbortSignal): Promise<void> {
    if (!this.#bootstrapFn) return;
    try {
      await this.#bootstrapFn(lease, { signal, host: this.host, purpose: 'main' });
    } catch (error) {
      await this.#supervisor.shutdownIfCurrent(lease, 'bootstrap_failed');
      if (signal.aborted && error === signal.reason) throw error;
      throw new BootstrapError(lease.slot, error);
    }
  }

  #configurePool(): void {
    if (this.#poolSize <= 0 || this.#supervisor.closed) return;
    const env = this.#activeEnv;
    const key = envKey(env);
    void this.#supervisor.drainPool(PYTHON_SLOT);
    this.#supervisor.configurePool(PYTHON_SLOT, key, (ctx) => this.#factory(this.#context('pool', env, ctx.signal)), {
      size: this.#poolSize,
      prepare: async (kernel, ctx) => {
        if (!this.#bootstrapFn) return;
        const provisional: Lease<K> = {
          slot: PYTHON_SLOT,
          key,
          generation: -1,
          id: `pool-${globalThis.crypto.randomUUID()}`,
          kernel,
        };
        await this.#bootstrapFn(provisional, { signal: ctx.signal, host: this.host, purpose: 'pool' });
      },
    });
  }

  async #executeR(code: string, opts: SessionExecuteOptions, turn: Turn): Promise<ExecuteResult> {
    const r = this.#r!;
    const { signal } = turn;
    const ctx = this.#rContext(turn);
    const hold = this.#supervisor.hold(r.language);
    try {
      let failure: string | null;
      try {
        failure = await r.ensure(ctx);
      } catch (error) {
        if (signal.aborted) throw signal.reason;
        failure = `R kernel unavailable: ${error instanceof Error ? error.message : String(error)}`;
      }
      // A stop (or the caller) cancelled the cell while R was starting: that is a cancelled cell, not a failure.
      if (signal.aborted) throw signal.reason;
      if (typeof failure === 'string') return unavailableResult(r, failure, opts.cellId);
      return await r.execute(code, { signal, ...pick(opts) }, ctx);
    } finally {
      hold.release();
    }
  }

  #rContext(turn: Turn): LanguageSlotContext {
    const ctx: LanguageSlotContext = {
      supervisor: this.#supervisor,
      env: this.#rEnv,
      executor: this.#executor,
      host: this.host,
      signal: turn.signal,
      stopSignal: turn.stop.signal,
    };
    if (this.#cwd !== undefined) ctx.cwd = this.#cwd;
    if (this.#readIsolation !== undefined) ctx.readIsolation = this.#readIsolation;
    return ctx;
  }

  #context(
    purpose: SlotFactoryContext['purpose'],
    env: string | undefined,
    signal: AbortSignal,
  ): SlotFactoryContext<H> {
    const ctx: SlotFactoryContext<H> = { slot: PYTHON_SLOT, env, purpose, signal, host: this.host };
    if (this.#cwd !== undefined) ctx.cwd = this.#cwd;
    if (this.#readIsolation !== undefined) ctx.readIsolation = this.#readIsolation;
    return ctx;
  }

  #emit(status: KernelStatus, slot: string, endedReason?: string): void {
    const s = this.#supervisor.status(slot);
    const event: KernelStatusEvent = { type: 'kernel_status', status, slot, generation: s.generation };
    if (s.leaseId !== undefined) event.leaseId = s.leaseId;
    if (slot === PYTHON_SLOT && this.#activeEnv !== undefined) event.env = this.#activeEnv;
    if (endedReason !== undefined) event.endedReason = endedReason;
    this.#events.emit(event.type, event);
  }
}

const turnCleanups = new WeakMap<Turn, () => void>();

/** The supervisor key of a Python environment: its name, or `''` for the factory's default. */
function envKey(env: string | undefined): string {
  return env ?? '';
}

function envFromKey(key: string): string | undefined {
  return key === '' ? undefined : key;
}

function pick(opts: SessionExecuteOptions): Pick<ExecuteOptions, 'cellId' | 'origin' | 'onOutput' | 'onInput'> {
  const out: Pick<ExecuteOptions, 'cellId' | 'origin' | 'onOutput' | 'onInput'> = {};
  if (opts.cellId !== undefined) out.cellId = opts.cellId;
  if (opts.origin !== undefined) out.origin = opts.origin;
  if (opts.onOutput) out.onOutput = opts.onOutput;
  if (opts.onInput) out.onInput = opts.onInput;
  return out;
}

function stopReason(message: string): Error {
  return new DOMException(message, 'AbortError');
}

function baseResult(cellId: string | undefined): ExecuteResult {
  return emptyResult(cellId ?? globalThis.crypto.randomUUID(), { status: 'aborted' });
}

function cancelledResult(cellId: string | undefined): ExecuteResult {
  return { ...baseResult(cellId), cancelled: true };
}

function unavailableResult(slot: LanguageSlot, message: string, cellId: string | undefined): ExecuteResult {
  const ename = slot.unavailableName ?? `${slot.language === 'r' ? 'R' : slot.language}KernelUnavailable`;
  const error = { ename, evalue: message, traceback: [] as string[] };
  return { ...baseResult(cellId), status: 'error', error, outputs: [{ type: 'error', ...error }] };
}

function invalid(path: string, message: string): Error {
  return new InvalidOptionsError([{ path, message }]);
}
