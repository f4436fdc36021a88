import { TypedEmitter, type Unsubscribe } from '@kernelwarden/core';

/** The rungs of the escalation ladder, in the order they can happen. */
export type WatchdogEventType = 'interrupt' | 'kill' | 'restart' | 'bootstrap' | 'abandon';

/** Why the ladder started: the cell's budget ran out, or the caller's signal aborted. */
export type EscalationReason = 'timeout' | 'cancelled';

/**
 * One rung of the escalation ladder, emitted right after the watchdog took it.
 *
 * `leaseId` and `generation` name the lease the rung acted on (for `bootstrap`, the restarted lease); `acted` says
 * whether the supervisor performed it (false for a stale lease or a failed step).
 */
export interface WatchdogEvent {
  /** Which rung. */
  type: WatchdogEventType;
  /** Why the ladder started. */
  reason: EscalationReason;
  /** The supervisor slot. */
  slot: string;
  /** The cell id sent to the kernel. */
  cellId: string;
  /** The `origin` label of the cell, when it had one. */
  origin?: string;
  /** Id of the lease the rung acted on. */
  leaseId: string;
  /** Generation of the lease the rung acted on. */
  generation: number;
  /** True when the supervisor performed the step on the exact lease. */
  acted: boolean;
  /** For `restart`: the lease the restart produced (generation + 1, same kernel object). */
  replacement?: { leaseId: string; generation: number };
  /** The error of a failed step (restart or bootstrap). */
  error?: unknown;
  /** The watchdog clock's time when the rung was taken. */
  at: number;
}

export type { Unsubscribe } from '@kernelwarden/core';

/** Receives watchdog events. */
export type WatchdogListener = (event: WatchdogEvent) => void;

/**
 * The watchdog's events on core's `TypedEmitter`: each event goes to the listeners of its type, then to the `'*'`
 * listeners; a listener that throws is isolated so it can never break the ladder that emitted the event.
 */
export class WatchdogEvents {
  readonly #emitter = new TypedEmitter<Record<WatchdogEventType | '*', WatchdogEvent>>();

  /** Calls `listener` for every event of `type` (`'*'`: every event); returns the function that removes it. */
  on(type: WatchdogEventType | '*', listener: WatchdogListener): Unsubscribe {
    return this.#emitter.on(type, listener);
  }

  /** Delivers `event` to the listeners of its type, then to the `'*'` listeners. */
  emit(event: WatchdogEvent): void {
    this.#emitter.emit(event.type, event);
    this.#emitter.emit('*', event);
  }
}
