import type { Clock, Timer } from '@kernelwarden/core';

/** What a silence wait watches: the socket's message count, and whether it could deliver anything now. */
export interface SilenceSource {
  /** Messages received so far; a change means the socket is not silent. */
  received(): number;
  /** True while the socket is open and no recovery runs: only then does silence mean something was lost. */
  listening(): boolean;
}

/** Options of `afterSilence()`. */
export interface SilenceWaitOptions {
  clock: Clock;
  /** How long the socket must be silent. */
  graceMs: number;
  source: SilenceSource;
  /** False once the wait is moot (the cell settled); checked before each step. */
  stillWaiting(): boolean;
  /** Called once the socket was silent and listening for `graceMs`. */
  onSilent(): void;
}

/**
 * Calls `onSilent` once the socket has received nothing for `graceMs` while listening; any message, a closed socket
 * or a recovery in progress starts the wait again. A timer can fire before data already in the socket is read (an
 * event loop that was blocked runs timers first), so the silence is confirmed once more after the next poll phase.
 *
 * Used for the two ways a cell's completion can be lost: its `status: idle` (after the reply) and its reply (after
 * the idle).
 */
export function afterSilence(opts: SilenceWaitOptions): Timer {
  const { clock, graceMs, source, stillWaiting, onSilent } = opts;
  let seen = source.received();
  let timer: Timer | undefined;
  const again = () => {
    seen = source.received();
    timer = clock.setTimer(tick, graceMs);
  };
  const tick = () => {
    timer = undefined;
    if (!stillWaiting()) return;
    if (source.received() !== seen || !source.listening()) {
      again();
      return;
    }
    setImmediate(() => {
      if (!stillWaiting()) return;
      if (source.received() !== seen) {
        again();
        return;
      }
      onSilent();
    });
  };
  timer = clock.setTimer(tick, graceMs);
  return { cancel: () => timer?.cancel() };
}
