// Test fixture (not exported): the pending-cells machinery on a manual clock, and cells to put in it.
import type { ExecuteOptions } from '@kernelwarden/core';
import { ManualClock } from '@kernelwarden/testkit';
import { DEFAULT_OUTPUT_CAPS } from './cell-output.js';
import { CellExecution } from './execution.js';
import { MessageSequence } from './message-sequence.js';
import { PendingCells, type PendingCellsOptions } from './pending-cells.js';

/** A cell with default caps, its request id `msgId` and its cell id `cellId` (else `msgId`). */
export function testCell(
  msgId: string,
  extra: { cellId?: string; opts?: ExecuteOptions; sequence?: MessageSequence; onDropped?: () => void } = {},
): CellExecution {
  return new CellExecution({
    msgId,
    cellId: extra.cellId ?? msgId,
    opts: extra.opts ?? {},
    caps: DEFAULT_OUTPUT_CAPS,
    sequenceMark: (extra.sequence ?? new MessageSequence()).mark(),
    ...(extra.onDropped ? { onDropped: extra.onDropped } : {}),
  });
}

/** `PendingCells` on a manual clock and an always-listening, silent socket (graces off unless given). */
export function testCells(opts: Partial<PendingCellsOptions> = {}) {
  const clock = new ManualClock();
  const sequence = new MessageSequence();
  const cells = new PendingCells({
    clock,
    idleGraceMs: 0,
    replyGraceMs: 0,
    sequence,
    socket: { received: () => 0, listening: () => true },
    onGraceSettled: () => {},
    ...opts,
  });
  /** Adds a new cell with request id `msgId` and returns it. */
  const add = (msgId: string, cellId?: string) => {
    const cell = testCell(msgId, { sequence, ...(cellId ? { cellId } : {}) });
    cells.add(cell);
    return cell;
  };
  return { clock, sequence, cells, add };
}
