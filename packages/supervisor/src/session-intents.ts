import { onAbort } from '@kernelwarden/core';
import { ClosedError, SessionStoppedError } from './errors.js';
import { TurnBarrier } from './turn-barrier.js';

/** The right to run one turn, or the news that a later stop cancelled the work before its turn came. */
export type Ticket = { release: () => void } | 'cancelled';

/**
 * The abort signals of the turn that holds the barrier: `signal` aborts on the caller's abort and on a stop or
 * close; `stop` only on a stop or close, and just before `signal`.
 */
export interface Turn {
  readonly controller: AbortController;
  readonly stop: AbortController;
  readonly signal: AbortSignal;
}

/**
 * The ordering of a session's intents: the turn barrier, the stop epoch that lets the last stop win, the stop in
 * progress that later work waits for, the cancelled state, and the running turn a stop aborts.
 *
 * Every `start()`, `stop()`, `execute()`, `setEnv()` and `restart()` takes the epoch when it is called and its turn
 * through `admit`; a stop bumps the epoch, so work issued before it is dropped when its turn comes. Internal to
 * `KernelSession`.
 */
export class SessionIntents {
  readonly #barrier = new TurnBarrier();
  readonly #cleanups = new WeakMap<Turn, () => void>();
  #epoch = 0;
  #turn: Turn | undefined;
  /** The stop in progress; work issued meanwhile waits for it. */
  stopping: Promise<void> | undefined;
  /** From a stop until the next `start()` or `execute()` enters its turn. */
  cancelled = false;
  /** The close in progress or done. */
  closing: Promise<void> | undefined;
  /** The close has finished. */
  closed = false;

  /** An execution or lifecycle step holds the barrier. */
  get turnRunning(): boolean {
    return this.#barrier.busy;
  }

  /** `close()` was called (it may still run). */
  get ending(): boolean {
    return this.closed || this.closing !== undefined;
  }

  /** Records a stop (or close) intent: everything issued before it is cancelled when its turn comes. */
  cancelIssued(): void {
    this.#epoch += 1;
    this.cancelled = true;
  }

  /**
   * Waits for the turn, honouring the stop intents: work issued during a stop waits for it; work issued before a
   * later stop is cancelled when it reaches the barrier (the last intent wins). The epoch is taken when the work is
   * issued — this runs synchronously up to its first `await` — so a stop that joins one in progress still cancels
   * what was issued between the two.
   */
  async admit(signal: AbortSignal | undefined): Promise<Ticket> {
    const epoch = this.#epoch;
    if (this.ending) throw new ClosedError('session');
    while (this.stopping) {
      await this.stopping.catch(() => undefined);
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
    return { release };
  }

  /** Enters the barrier without an epoch (a stop's or close's own turn). */
  enter(): Promise<() => void> {
    return this.#barrier.enter();
  }

  /** Starts the turn of admitted work; its signal follows the caller's. */
  beginTurn(callerSignal: AbortSignal | undefined): Turn {
    const controller = new AbortController();
    const turn: Turn = { controller, stop: new AbortController(), signal: controller.signal };
    if (callerSignal?.aborted) controller.abort(callerSignal.reason);
    else if (callerSignal) {
      this.#cleanups.set(
        turn,
        onAbort(callerSignal, () => controller.abort(callerSignal.reason)),
      );
    }
    this.#turn = turn;
    return turn;
  }

  /** Ends a turn: its listener on the caller's signal goes. */
  endTurn(turn: Turn): void {
    this.#cleanups.get(turn)?.();
    this.#cleanups.delete(turn);
    if (this.#turn === turn) this.#turn = undefined;
  }

  /**
   * Cancels the running turn for a stop or close: its stop signal first, so an executor can tell a stop from a
   * caller's abort.
   */
  abortTurn(reason: Error): void {
    this.#turn?.stop.abort(reason);
    this.#turn?.controller.abort(reason);
  }

  /** The error a lifecycle call rejects with: the caller's abort reason, or `ClosedError`/`SessionStoppedError`. */
  lifecycleError(error: unknown, turn: Turn, caller: AbortSignal | undefined, what: string): unknown {
    if (!turn.signal.aborted || error !== turn.signal.reason) return error;
    if (caller?.aborted) return caller.reason;
    return this.closing ? new ClosedError('session') : new SessionStoppedError(what);
  }
}
