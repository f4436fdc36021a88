import { onAbort } from '@kernelwarden/core';
import { ClosedError, SessionStoppedError } from './errors.js';
import { TurnBarrier } from './turn-barrier.js';

/**
 * Where a session stands between its intents:
 *
 * - `ready`: work runs in its turn;
 * - `stopping`: a `stop()` runs; work issued meanwhile waits for it, work issued before it is cancelled;
 * - `cancelled`: the last stop has finished; the next `start()`, `execute()` or `restart()` that enters its turn
 *   makes the session `ready` again;
 * - `closing`: `close()` runs (it may have superseded a stop still running); every new intent is refused;
 * - `closed`: the close has shut everything down. Final.
 *
 * A close that fails leaves the session `closing`: it still refuses every new intent.
 */
export type IntentState = 'ready' | 'stopping' | 'cancelled' | 'closing' | 'closed';

/** The work that asks for a turn. `execute`, `start` and `restart` end the cancelled state; `setEnv` keeps it. */
export type Intent = 'execute' | 'start' | 'restart' | 'setEnv';

/**
 * One admitted piece of work holding the turn barrier. `signal` aborts on the caller's abort and on a stop or close;
 * `stopSignal` only on a stop or close, and just before `signal`. `end()` (idempotent) gives the barrier up.
 */
export interface Turn {
  readonly signal: AbortSignal;
  readonly stopSignal: AbortSignal;
  end(): void;
}

/** What the session's status reports of its intents. */
export interface IntentFlags {
  /** From a stop until the next `start()`, `execute()` or `restart()` enters its turn; also while closing and closed. */
  cancelled: boolean;
  /** A stop runs (also one a close waits for). */
  stopping: boolean;
  /** An execution or lifecycle step holds the barrier. */
  turnRunning: boolean;
  /** The close has finished. */
  closed: boolean;
}

const ENDS_CANCELLED: Readonly<Record<Intent, boolean>> = { execute: true, start: true, restart: true, setEnv: false };

class HeldTurn implements Turn {
  readonly #caller = new AbortController();
  readonly #stop = new AbortController();
  readonly #onEnd: (turn: HeldTurn) => void;
  #release: (() => void) | undefined;
  #unlisten: (() => void) | undefined;

  constructor(callerSignal: AbortSignal | undefined, release: () => void, onEnd: (turn: HeldTurn) => void) {
    this.#release = release;
    this.#onEnd = onEnd;
    if (callerSignal?.aborted) this.#caller.abort(callerSignal.reason);
    else if (callerSignal) this.#unlisten = onAbort(callerSignal, () => this.#caller.abort(callerSignal.reason));
  }

  get signal(): AbortSignal {
    return this.#caller.signal;
  }

  get stopSignal(): AbortSignal {
    return this.#stop.signal;
  }

  /** The stop signal first, so an executor can tell a stop from a caller's abort. */
  abort(reason: Error): void {
    this.#stop.abort(reason);
    this.#caller.abort(reason);
  }

  end(): void {
    const release = this.#release;
    if (!release) return;
    this.#release = undefined;
    this.#unlisten?.();
    this.#unlisten = undefined;
    this.#onEnd(this);
    release();
  }
}

/**
 * The state machine of a session's intents (`start()`, `stop()`, `execute()`, `setEnv()`, `restart()`, `close()`):
 * the turn barrier that runs one of them at a time, the stop epoch that lets the last stop win, and the states in
 * {@link IntentState}. `KernelSession` tells it each event — work asks for a turn (`admit`), `stop`, `close`,
 * `closeFinished` — and asks it questions (`state`, `ending`, `flags`, `turnError`); it exposes nothing to write.
 *
 * Transitions (anything not listed keeps the state):
 *
 * | from                          | event                                     | to          |
 * | ----------------------------- | ----------------------------------------- | ----------- |
 * | ready, cancelled              | `stop()`                                  | stopping    |
 * | stopping                      | `stop()` (joins the stop in progress)     | stopping    |
 * | stopping                      | the stop's work settles                   | cancelled   |
 * | cancelled                     | `execute`/`start`/`restart` enters a turn | ready       |
 * | ready, cancelled, stopping    | `close()`                                 | closing     |
 * | closing                       | `closeFinished()`                         | closed      |
 *
 * Refused or no-ops: `admit` while closing or closed rejects with `ClosedError`; `stop()` while closing or closed
 * returns the close's promise (resolved when there was none) and changes nothing; `close()` while closing or closed
 * returns the same promise; `closeFinished()` outside `closing` is a no-op; a stop that settles after a close began
 * leaves the state `closing`; `Turn.end()` a second time is a no-op.
 *
 * Every intent takes the epoch when it is issued; a stop or close bumps it, so work issued before it is cancelled when
 * its turn comes (the last intent wins), also when the stop joins one in progress. Internal to `KernelSession`.
 */
export class SessionIntents {
  readonly #barrier = new TurnBarrier();
  #state: IntentState = 'ready';
  #epoch = 0;
  #turn: HeldTurn | undefined;
  /** The stop in progress: work issued meanwhile, and a close, wait for it. */
  #stop: Promise<void> | undefined;
  /** The close in progress or done. */
  #close: Promise<void> | undefined;

  get state(): IntentState {
    return this.#state;
  }

  /** `close()` was called (it may still run): every new intent is refused. */
  get ending(): boolean {
    return this.#state === 'closing' || this.#state === 'closed';
  }

  /** True from a stop until the next `start()`, `execute()` or `restart()` enters its turn; also when ending. */
  get cancelled(): boolean {
    return this.#state !== 'ready';
  }

  flags(): IntentFlags {
    return {
      cancelled: this.cancelled,
      stopping: this.#stop !== undefined,
      turnRunning: this.#barrier.busy,
      closed: this.#state === 'closed',
    };
  }

  /**
   * The event "work issued": waits for its turn, honouring the stop intents. Work issued during a stop waits for it;
   * work issued before a later stop resolves `'cancelled'` when it reaches the barrier. The epoch is taken when the
   * work is issued — this runs synchronously up to its first `await` — so a stop that joins one in progress still
   * cancels what was issued between the two. The turn begins as it is granted (an `execute`, `start` or `restart`
   * makes a cancelled session ready), so a stop issued from then on aborts it. Rejects with `ClosedError` once the
   * session is ending, and with `signal.reason` when the caller aborts while waiting.
   */
  async admit(intent: Intent, signal: AbortSignal | undefined): Promise<Turn | 'cancelled'> {
    const epoch = this.#epoch;
    if (this.ending) throw new ClosedError('session');
    while (this.#stop) {
      await this.#stop.catch(() => undefined);
      if (this.ending) throw new ClosedError('session');
      signal?.throwIfAborted();
    }
    if (this.#epoch !== epoch) return 'cancelled';
    const release = await this.#barrier.enter(signal);
    if (this.ending) {
      release();
      throw new ClosedError('session');
    }
    if (this.#epoch !== epoch) {
      release();
      return 'cancelled';
    }
    const turn = new HeldTurn(signal, release, (ended) => {
      if (this.#turn === ended) this.#turn = undefined;
    });
    this.#turn = turn;
    if (ENDS_CANCELLED[intent] && this.#state === 'cancelled') this.#state = 'ready';
    return turn;
  }

  /**
   * The event `stop()`. While ending it changes nothing and returns the close's promise. Otherwise work issued
   * before it is cancelled; a stop in progress is joined; else the session becomes `stopping`: `begin` runs the
   * stop's work (its synchronous part — the interrupts — before the running turn is aborted with `reason`), and the
   * session becomes `cancelled` when that work settles.
   */
  stop(reason: Error, begin: () => Promise<void>): Promise<void> {
    if (this.ending) return this.#close ?? Promise.resolve();
    this.#epoch += 1;
    if (this.#stop) return this.#stop;
    this.#state = 'stopping';
    const stopping = begin().finally(() => {
      if (this.#stop === stopping) this.#stop = undefined;
      if (this.#state === 'stopping') this.#state = 'cancelled';
    });
    this.#stop = stopping;
    this.#turn?.abort(reason);
    return stopping;
  }

  /**
   * The event `close()`. While ending it returns the close's promise. Otherwise everything issued before it is
   * cancelled, the session becomes `closing`, `begin` runs the close's work (its synchronous part before the running
   * turn is aborted with `reason`), and its promise is the close's. The close's own turn (`ownTurn`) waits for a
   * stop in progress.
   */
  close(reason: Error, begin: () => Promise<void>): Promise<void> {
    if (this.#close) return this.#close;
    this.#epoch += 1;
    this.#state = 'closing';
    const closing = begin();
    this.#close = closing;
    this.#turn?.abort(reason);
    return closing;
  }

  /** The event "the close shut everything down": `closing` becomes `closed`. A no-op in any other state. */
  closeFinished(): void {
    if (this.#state === 'closing') this.#state = 'closed';
  }

  /**
   * The barrier for a stop's or close's own steps, without an epoch; a close's waits first for the stop it
   * superseded. Resolves with the release function.
   */
  async ownTurn(): Promise<() => void> {
    if (this.ending && this.#stop) await this.#stop.catch(() => undefined);
    return this.#barrier.enter();
  }

  /**
   * The error a lifecycle call rejects with when its step failed: the caller's abort reason when the caller aborted,
   * `ClosedError` or `SessionStoppedError` when a close or stop cancelled the turn, else the step's own error.
   */
  turnError(error: unknown, turn: Turn, caller: AbortSignal | undefined, what: string): unknown {
    if (!turn.signal.aborted || error !== turn.signal.reason) return error;
    if (caller?.aborted) return caller.reason;
    return this.ending ? new ClosedError('session') : new SessionStoppedError(what);
  }
}
