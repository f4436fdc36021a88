import type { Clock } from '@kernelwarden/core';
import type { CellExecution } from './execution.js';
import type { PendingCells } from './pending-cells.js';
import type { SendGate } from './send-gate.js';

/** Options of `new InterruptDrain()`. */
export interface InterruptDrainOptions {
  clock: Clock;
  /** The longest later requests wait for an interrupted cell's reply. */
  drainMs: number;
  cells: PendingCells;
  gate: SendGate;
  /** False once the kernel is gone: nothing to interrupt or drain. */
  alive(): boolean;
  /** Asks the gateway to interrupt the kernel (never throws). */
  interrupt(): void;
}

/**
 * Cancelling a cell: it settles at once as aborted (`cancelled`, maybe `timedOut`), keeping its output so far. When
 * it is the cell the kernel runs now, the kernel is interrupted — and because ipykernel aborts every request already
 * queued behind an interrupted cell that errors (`stop_on_error`), requests sent after the cancel are held until the
 * interrupted cell's reply and idle arrived, at most `drainMs`. A cancelled cell still queued behind another is not
 * interrupted for (it may still run).
 */
export class InterruptDrain {
  readonly #opts: InterruptDrainOptions;

  constructor(opts: InterruptDrainOptions) {
    this.#opts = opts;
  }

  /** Cancels `cell`; `interrupt: false` settles it without interrupting (the start's own steps). */
  cancel(cell: CellExecution, flags: { timedOut: boolean; interrupt: boolean }): void {
    if (cell.settled) return;
    const { cells, clock, gate } = this.#opts;
    const running = cells.running === cell;
    cell.abort({ cancelled: true, timedOut: flags.timedOut });
    if (!flags.interrupt || !running || !this.#opts.alive()) return;
    let release!: () => void;
    const drained = new Promise<void>((resolve) => (release = resolve));
    const timer = clock.setTimer(() => release(), this.#opts.drainMs);
    const forget = cells.adoptOrphan(cell, () => release());
    gate.hold(drained, () => {
      timer.cancel();
      forget();
    });
    this.#opts.interrupt();
  }
}
