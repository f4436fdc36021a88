import { randomUUID } from 'node:crypto';
import { abortScope, type Clock, type ExecuteOptions } from '@kernelwarden/core';
import { createMessage, type JupyterMessage } from '@kernelwarden/jupyter-protocol';
import type { OutputCaps } from './cell-output.js';
import { CellExecution } from './execution.js';
import type { MessageSequence } from './message-sequence.js';

/** What `cellRequest()` needs of the kernel a cell runs on. */
export interface CellRequestContext {
  sessionId: string;
  stopOnError: boolean;
  outputCaps: OutputCaps;
  sequence: MessageSequence;
  clock: Clock;
  /** The server dropped some of the cell's output. */
  dropped(event: { cellId: string; origin?: string }): void;
  /** The caller's signal aborted or its deadline passed while the cell was pending. */
  cancel(cell: CellExecution, timedOut: boolean): void;
}

/**
 * A cell's `execute_request` (its `cellId` in the metadata) and the `CellExecution` that collects its output and
 * settles it — already aborted (`cancelled`) when the caller's signal was, and tied to the signal and `timeoutMs`.
 */
export function cellRequest(
  code: string,
  opts: ExecuteOptions,
  ctx: CellRequestContext,
): { msg: JupyterMessage; cell: CellExecution } {
  const cellId = opts.cellId ?? randomUUID();
  const silent = opts.silent ?? false;
  const content = {
    code,
    silent,
    store_history: opts.storeHistory ?? !silent,
    user_expressions: {},
    allow_stdin: opts.onInput !== undefined,
    stop_on_error: ctx.stopOnError,
  };
  const msg = createMessage('shell', 'execute_request', ctx.sessionId, content, { metadata: { cellId } });
  const { origin } = opts;
  const cell = new CellExecution({
    msgId: msg.header.msg_id,
    cellId,
    opts,
    caps: ctx.outputCaps,
    sequenceMark: ctx.sequence.mark(),
    onDropped: () => ctx.dropped(origin === undefined ? { cellId } : { cellId, origin }),
  });
  if (opts.signal?.aborted) {
    cell.abort({ cancelled: true });
  } else if (opts.signal || (opts.timeoutMs !== undefined && opts.timeoutMs > 0)) {
    const s = abortScope({ signal: opts.signal, timeoutMs: opts.timeoutMs, clock: ctx.clock });
    const onAbort = () => ctx.cancel(cell, s.timedOut);
    s.signal.addEventListener('abort', onAbort, { once: true });
    cell.onSettled(() => {
      s.signal.removeEventListener('abort', onAbort);
      s.dispose();
    });
  }
  return { msg, cell };
}
