import { createMessage, type JupyterMessage } from '@kernelwarden/jupyter-protocol';
import type { CellExecution } from './execution.js';

/** Where a stdin answer goes. */
export interface StdinChannel {
  /** The session id the reply is sent under. */
  readonly sessionId: string;
  /** False once the kernel is gone: an answer that comes too late is dropped. */
  alive(): boolean;
  send(msg: JupyterMessage): void;
}

/**
 * Answers a cell's `input_request` with the caller's `onInput` (an `onInput` that throws answers `''`). The cell
 * records that stdin was requested; an answer that arrives after the cell settled or the kernel went away is
 * dropped. `allow_stdin` is true only when `onInput` was given, so without one the kernel never asks.
 */
export async function answerInputRequest(
  cell: CellExecution,
  request: JupyterMessage,
  to: StdinChannel,
): Promise<void> {
  cell.markStdinRequested();
  const onInput = cell.onInput;
  let value = '';
  if (onInput) {
    try {
      value = await onInput({
        prompt: String(request.content.prompt ?? ''),
        password: request.content.password === true,
      });
    } catch {
      value = '';
    }
  }
  if (cell.settled || !to.alive()) return;
  to.send(createMessage('stdin', 'input_reply', to.sessionId, { value }, { parent: request.header }));
}
