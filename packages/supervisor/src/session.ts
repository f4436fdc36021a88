import {
  type EventMapOf,
  type ExecuteOptions,
  type ExecuteResult,
  InvalidOptionsError,
  raceSignal,
  TypedEmitter,
} from '@kernelwarden/core';
import { BackgroundCells, type BackgroundPeek } from './background.js';
import { cancelledResult } from './cell-results.js';
import { ClosedError, SessionStoppedError } from './errors.js';
import type { Unsubscribe } from './events.js';
import type { CellRunRequest } from './executor.js';
import type { Lease, SupervisedKernel } from './lease.js';
import { PythonSlot } from './python-slot.js';
import { SessionIntents, type Turn } from './session-intents.js';
import {
  type KernelSessionOptions,
  PYTHON_SLOT,
  type ResolvedSessionOptions,
  resolveSessionOptions,
} from './session-options.js';
import { SessionSlots } from './session-slots.js';
import type {
  KernelStatus,
  KernelStatusEvent,
  SessionExecuteOptions,
  SessionLanguage,
  SessionStatus,
} from './session-status.js';
import { KernelSupervisor } from './supervisor.js';

const STOP_REASON = 'manual_stop';

/**
 * One conversation's kernels: a Python slot and language slots by name (R, and any other) behind a turn barrier,
 * with stop/start intents that cannot overtake each other, build-first environment switches, bootstrap after every
 * new generation, background cells on their own kernels, and `kernel_status` events.
 *
 * Create one per conversation; `close()` it (or `await using`) when the conversation ends. `K` is the Python
 * kernel type, `H` the host-state type, `L` the names of the slots given in `slots` (inferred from them).
 */
export class KernelSession<K extends SupervisedKernel = SupervisedKernel, H = unknown, L extends string = never> {
  readonly #options: ResolvedSessionOptions<K, H>;
  readonly #supervisor: KernelSupervisor<K>;
  readonly #python: PythonSlot<K, H>;
  readonly #slots: SessionSlots<K, H>;
  readonly #intents = new SessionIntents();
  readonly #events = new TypedEmitter<EventMapOf<KernelStatusEvent>>();
  readonly #background: BackgroundCells;
  #host: { value: H } | undefined;

  /** Validates the options (`InvalidOptionsError` naming every bad field) and applies their defaults. */
  constructor(opts: KernelSessionOptions<K, H, L>) {
    const options = resolveSessionOptions(opts);
    this.#options = options;
    const supervisor = new KernelSupervisor<K>({ idleTtlMs: options.idleTtlMs, clock: options.clock });
    this.#supervisor = supervisor;
    const host = () => this.host;
    this.#python = new PythonSlot<K, H>({
      supervisor,
      options,
      host,
      emit: (status) => this.#emit(status, PYTHON_SLOT),
    });
    this.#slots = new SessionSlots<K, H>(supervisor, options, host);
    this.#background = new BackgroundCells({ maxActive: options.maxBackground, maxPeekChars: options.maxPeekChars });
    supervisor.on('restarted', (event) => {
      if (event.slot === PYTHON_SLOT) this.#emit('restarted', PYTHON_SLOT);
    });
    supervisor.on('ended', (event) => {
      if (event.reason === 'idle_ttl') this.#emit('ended', event.slot, 'idle_ttl');
    });
    this.#python.configureSpares();
  }

  /** The session's supervisor: its Python slot is `'python'`; each language slot keeps its kernel here too. */
  get supervisor(): KernelSupervisor<K> {
    return this.#supervisor;
  }

  /** The session's host-side state, made once by `createHost` on first use and never rebuilt. */
  get host(): H {
    this.#host ??= { value: this.#options.createHost() };
    return this.#host.value;
  }

  /** True from a `stop()` until the next `start()` or `execute()` enters its turn. */
  get cancelled(): boolean {
    return this.#intents.cancelled;
  }

  /** The languages this session runs, Python first (`['python', 'r']`). */
  get languages(): SessionLanguage<L>[] {
    return this.#slots.languages() as SessionLanguage<L>[];
  }

  /** Listens to `kernel_status` events; returns the function that stops listening. */
  on(type: 'kernel_status', listener: (event: KernelStatusEvent) => void): Unsubscribe {
    return this.#events.on(type, listener);
  }

  /**
   * Runs one cell under the turn barrier, on the live Python kernel (starting one, with bootstrap, when there is
   * none) or on the language slot named by `opts.language`. A cell cancelled by `stop()`, `close()` or its own
   * signal settles with `cancelled: true`; a language slot that cannot start resolves with an error result that
   * `KernelUnavailableError.fromResult` recognises. A language the session has no slot for rejects with
   * `UnknownLanguageError`.
   */
  async execute(code: string, opts: SessionExecuteOptions<L> = {}): Promise<ExecuteResult> {
    if (typeof code !== 'string') throw invalid('code', 'expected a string');
    const language: string = opts.language ?? PYTHON_SLOT;
    if (language !== PYTHON_SLOT) this.#slots.get(language);
    let turn: Turn | 'cancelled';
    try {
      turn = await this.#intents.admit('execute', opts.signal);
    } catch (error) {
      if (opts.signal?.aborted && error === opts.signal.reason) return cancelledResult(opts.cellId);
      throw error;
    }
    if (turn === 'cancelled') return cancelledResult(opts.cellId);
    try {
      if (language !== PYTHON_SLOT) return await this.#slots.execute(language, code, pick(opts), turn);
      return await this.#executePython(code, opts, turn);
    } catch (error) {
      if (turn.signal.aborted && error === turn.signal.reason) return cancelledResult(opts.cellId);
      throw error;
    } finally {
      turn.end();
    }
  }

  /**
   * Starts the Python kernel if it is not running (with bootstrap) and emits `kernel_status: started`. A start
   * issued while a stop is in progress waits for that stop, so the events are always `stopped` then `started`;
   * it clears the cancelled state. Rejects with `SessionStoppedError` when a stop issued after it wins.
   */
  start(opts: { signal?: AbortSignal } = {}): Promise<SessionStatus<L>> {
    return this.#lifecycle('start', opts.signal, async (turn) => {
      await this.#python.ensure(turn.signal, null);
      this.#emit('started', PYTHON_SLOT);
    });
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
    // Every stop is a new intent, also one that joins a stop in progress: work issued before it is cancelled. The
    // interrupts go first (recorded before the turn's own abort), then the turn is cancelled so it leaves the barrier.
    return this.#intents.stop(stopReason('The session was stopped'), () => this.#runStop(this.#supervisor.interrupt()));
  }

  /**
   * Switches the Python environment. With a live kernel in another environment it builds and bootstraps the
   * replacement first, and only then swaps it in (generation + 1) and shuts the old one down; until then the old
   * kernel keeps its lease, environment and generation. A build or bootstrap that fails rejects and leaves all of
   * them as they were, but remembers `name` as desired (the next kernel built after a stop uses it). Without a live
   * kernel it only records the choice. Emits `env_changed`.
   */
  setEnv(name: string, opts: { signal?: AbortSignal } = {}): Promise<SessionStatus<L>> {
    if (typeof name !== 'string' || name.length === 0) {
      return Promise.reject(invalid('name', 'expected a non-empty string'));
    }
    // The intent's own promise, not a wrapper's: its rejection reaches the caller before the next turn's work starts.
    return this.#lifecycle('setEnv', opts.signal, async (turn) => {
      await this.#python.switchEnv(name, turn.signal);
      this.#emit('env_changed', PYTHON_SLOT);
    });
  }

  /**
   * Records the environment of a language slot (`undefined`: its default); the slot replaces its kernel lazily, on
   * its next cell. Throws `UnknownLanguageError` for a language the session has no slot for.
   */
  setSlotEnv(language: Exclude<SessionLanguage<L>, 'python'>, name: string | undefined): void {
    checkEnvName(name);
    this.#slots.get(language);
    this.#slots.setEnv(language, name);
  }

  /**
   * Restarts the Python kernel in place (same kernel, fresh interpreter, generation + 1) and re-runs bootstrap;
   * starts one when there is none. Emits `kernel_status: restarted`.
   */
  restart(opts: { signal?: AbortSignal } = {}): Promise<SessionStatus<L>> {
    return this.#lifecycle('restart', opts.signal, (turn) => this.#python.restart(turn.signal));
  }

  /**
   * Starts `code` on a kernel of its own — made by the session's factory with the active environment, working
   * directory and read-isolation policy — without the turn barrier and without touching the session's lease. The
   * kernel is shut down when the cell ends. Can be the session's very first action.
   */
  runBackground(code: string, opts: { cellId?: string; origin?: string } = {}): { execId: string } {
    if (typeof code !== 'string') throw invalid('code', 'expected a string');
    if (this.#intents.ending) throw new ClosedError('session');
    return this.#background.start(code, this.#python.backgroundKernel(), opts);
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

  /** The Python slot's status plus the session's own state and each language slot's. Answers at once. */
  status(): SessionStatus<L> {
    const slots = this.#slots.statuses();
    const status: SessionStatus<L> = {
      ...this.#supervisor.status(PYTHON_SLOT),
      env: this.#python.activeEnv,
      desiredEnv: this.#python.desiredEnv,
      ...this.#intents.flags(),
      backgroundRunning: this.#background.running,
      slots,
    };
    return status;
  }

  /**
   * Ends the session: cancels the running turn, shuts down every kernel — slots, language slots, background cells
   * and the spares — waits until cancelled builds are shut down too, and emits `kernel_status: ended`
   * (`endedReason: 'session_closed'`). Idempotent. Aborting `signal` only stops waiting: the close runs to its end.
   */
  close(opts: { signal?: AbortSignal } = {}): Promise<void> {
    if (opts.signal) return raceSignal(this.close(), opts.signal);
    return this.#intents.close(stopReason('The session was closed'), () => {
      void this.#supervisor.interrupt();
      return this.#runClose();
    });
  }

  /** `close()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #executePython(code: string, opts: SessionExecuteOptions<L>, turn: Turn): Promise<ExecuteResult> {
    const hold = this.#supervisor.hold(PYTHON_SLOT);
    try {
      const lease = await this.#python.ensure(turn.signal, 'started');
      const request: CellRunRequest<K> = {
        supervisor: this.#supervisor,
        slot: PYTHON_SLOT,
        code,
        lease,
        signal: turn.signal,
        stopSignal: turn.stopSignal,
        // After an executor reset the kernel (the watchdog's restart), it must be bootstrapped whether or not the
        // caller gave up on the cell: only a stop or close cancels that.
        bootstrap: (next: Lease<K>) => this.#python.bootstrap(next, turn.stopSignal),
        ...pick(opts),
      };
      return await this.#options.executor.run(request);
    } finally {
      hold.release();
    }
  }

  /** Runs a lifecycle step (`start`, `setEnv`, `restart`) as an intent in its own turn, and answers the status. */
  async #lifecycle(
    intent: 'start' | 'setEnv' | 'restart',
    signal: AbortSignal | undefined,
    step: (turn: Turn) => Promise<void>,
  ): Promise<SessionStatus<L>> {
    const what = `${intent}()`;
    const turn = await this.#intents.admit(intent, signal);
    if (turn === 'cancelled') throw new SessionStoppedError(what);
    try {
      await step(turn);
      return this.status();
    } catch (error) {
      throw this.#intents.turnError(error, turn, signal, what);
    } finally {
      turn.end();
    }
  }

  async #runStop(interrupted: Promise<number>): Promise<void> {
    // The interrupts were sent synchronously by stop(); their delivery is not awaited, so a slow or hung interrupt
    // request cannot hold the stop back.
    interrupted.catch(() => undefined);
    const release = await this.#intents.ownTurn();
    try {
      await this.#slots.shutdownAll(STOP_REASON);
      await this.#supervisor.stop(PYTHON_SLOT, { reason: STOP_REASON, manual: true });
      await this.#supervisor.stop(undefined, { reason: STOP_REASON, manual: true });
      this.#emit('stopped', PYTHON_SLOT, STOP_REASON);
    } finally {
      release();
    }
  }

  async #runClose(): Promise<void> {
    const background = this.#background.closeAll();
    const release = await this.#intents.ownTurn();
    try {
      await this.#slots.shutdownAll('session_closed');
      await this.#supervisor.stop(PYTHON_SLOT, { reason: 'session_closed', manual: false });
      await this.#supervisor.stop(undefined, { reason: 'session_closed', manual: false });
      await this.#supervisor.shutdownAll();
      await background;
      await this.#supervisor.settled();
      this.#intents.closeFinished();
      this.#emit('ended', PYTHON_SLOT, 'session_closed');
    } finally {
      release();
    }
  }

  #emit(status: KernelStatus, slot: string, endedReason?: string): void {
    const s = this.#supervisor.status(slot);
    const event: KernelStatusEvent = { type: 'kernel_status', status, slot, generation: s.generation };
    if (s.leaseId !== undefined) event.leaseId = s.leaseId;
    if (slot === PYTHON_SLOT && this.#python.activeEnv !== undefined) event.env = this.#python.activeEnv;
    if (endedReason !== undefined) event.endedReason = endedReason;
    this.#events.emit(event.type, event);
  }
}

function pick(opts: SessionExecuteOptions<string>): Pick<ExecuteOptions, 'cellId' | 'origin' | 'onOutput' | 'onInput'> {
  const out: Pick<ExecuteOptions, 'cellId' | 'origin' | 'onOutput' | 'onInput'> = {};
  if (opts.cellId !== undefined) out.cellId = opts.cellId;
  if (opts.origin !== undefined) out.origin = opts.origin;
  if (opts.onOutput) out.onOutput = opts.onOutput;
  if (opts.onInput) out.onInput = opts.onInput;
  return out;
}

function checkEnvName(name: unknown): void {
  if (name !== undefined && (typeof name !== 'string' || name.length === 0)) {
    throw invalid('name', 'expected a non-empty string or undefined');
  }
}

function stopReason(message: string): Error {
  return new DOMException(message, 'AbortError');
}

function invalid(path: string, message: string): Error {
  return new InvalidOptionsError([{ path, message }]);
}
