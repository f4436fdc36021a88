import type { JupyterMessage } from '@kernelwarden/jupyter-protocol';
import type { CellExecution } from './execution.js';
import type { Handshake } from './handshake.js';
import type { MessageSequence } from './message-sequence.js';
import type { PendingCells } from './pending-cells.js';

/** Where `routeMessage` delivers. */
export interface MessageTargets {
  /** This client's session id: the server's own messages come under it and are not numbered by the kernel. */
  sessionId: string;
  sequence: MessageSequence;
  handshake: Handshake;
  cells: PendingCells;
  /** A `busy` or `idle` status of one of this handle's own requests. */
  ownStatus(state: 'busy' | 'idle'): void;
  /** An unsolicited `restarting` or `dead` status: the server's auto-restarter, or a death. */
  serverStatus(state: 'restarting' | 'dead'): void;
  /** A cell's `input_request`. */
  inputRequest(cell: CellExecution, msg: JupyterMessage): void;
}

/**
 * Hands every received message, in arrival order and synchronously, to the part it belongs to: iopub to the
 * handshake (its nudges wait for iopub) and to the cell it is a child of (`PendingCells`), the kernel's own status
 * to the facade, `kernel_info_reply` to the handshake (or to `PendingCells`' reconnect probe), `execute_reply` to its cell, `input_request` to stdin. The
 * kernel's message numbers are noted first (`MessageSequence`).
 */
export function routeMessage(msg: JupyterMessage, to: MessageTargets): void {
  const parentId = msg.parent_header.msg_id;
  const type = msg.header.msg_type;
  if (msg.header.session !== to.sessionId && typeof msg.header.msg_id === 'string') {
    to.sequence.observe(msg.header.msg_id);
  }
  if (msg.channel === 'iopub') {
    if (parentId !== undefined) to.handshake.iopub(parentId);
    if (type === 'status') {
      const state = msg.content.execution_state;
      if (state === 'restarting' || state === 'dead') {
        to.serverStatus(state);
        return;
      }
      // Only this handle's cells move the status: the handshake's and the server's own kernel_info requests (and
      // other clients' cells) make the kernel flap busy/idle too.
      if ((state === 'busy' || state === 'idle') && parentId !== undefined && to.cells.owns(parentId)) {
        to.ownStatus(state);
      }
    }
    if (parentId !== undefined) to.cells.iopub(msg, parentId);
    return;
  }
  if (parentId === undefined) return;
  if (msg.channel === 'shell') {
    if (type === 'kernel_info_reply') {
      if (!to.handshake.reply(msg.content, parentId)) to.cells.probeReplied(parentId);
    } else if (type === 'execute_reply') to.cells.reply(msg, parentId);
  } else if (msg.channel === 'stdin' && type === 'input_request') {
    const cell = to.cells.get(parentId);
    if (cell) to.inputRequest(cell, msg);
  }
}
