import type { Clock } from '@kernelwarden/core';
import type { JupyterMessage } from '@kernelwarden/jupyter-protocol';
import type { CellExecution } from './execution.js';
import type { MessageSequence } from './message-sequence.js';
import { afterSilence, type SilenceSource } from './silence-wait.js';

/** Options of `new PendingCells()`. */
export interface PendingCellsOptions {
  clock: Clock;
  /** After a cell's reply, how long a silent socket waits for its idle (`0`: for ever). */
  idleGraceMs: number;
  /** After a cell's idle, how long a silent socket waits for its reply (`0`: for ever). */
  replyGraceMs: number;
  /** The kernel's message numbers, to tell whether a cell that ran across a reconnect lost output. */
  sequence: MessageSequence;
  /** The socket the graces listen to. */
  socket: SilenceSource;
  /** A grace settled a cell whose idle or reply never came. */
  onGraceSettled(): void;
}

/** A cell the caller stopped waiting for, whose kernel still runs it: its reply and idle are still awaited. */
interface Orphan {
  replied: boolean;
  idle: boolean;
  done(): void;
}

/**
 * The cells in flight, in the order their requests were sent, and where a cell completes: each gets its iopub
 * messages and its `execute_reply` here, and completes once it has both, in either order. When one of the two is
 * lost, a grace on the socket's silence settles it anyway (`idleGraceMs`, `replyGraceMs`). A cell that ran across a
 * reconnect and whose kernel's message numbers show a hole since its request completes with `outputDropped`.
 *
 * It also keeps the orphans: cancelled cells the kernel was interrupted for, whose reply and idle later requests
 * wait for (see `InterruptDrain`).
 */
export class PendingCells {
  readonly #opts: PendingCellsOptions;
  readonly #cells = new Map<string, CellExecution>();
  readonly #orphans = new Map<string, Orphan>();
  /** Reconnect probes (`kernel_info_request` ids) and the unanswered cells sent before each. */
  readonly #probes = new Map<string, CellExecution[]>();

  constructor(opts: PendingCellsOptions) {
    this.#opts = opts;
  }

  /** How many cells are in flight. */
  get size(): number {
    return this.#cells.size;
  }

  /** The oldest cell in flight: the one the kernel runs now (it runs requests in order). */
  get running(): CellExecution | undefined {
    return this.#cells.values().next().value;
  }

  /** The cells in flight, oldest first. */
  values(): IterableIterator<CellExecution> {
    return this.#cells.values();
  }

  /** The cell in flight whose request has this `msg_id`. */
  get(msgId: string): CellExecution | undefined {
    return this.#cells.get(msgId);
  }

  /** True when `msgId` is a cell in flight or an orphan: this handle's own request. */
  owns(msgId: string): boolean {
    return this.#cells.has(msgId) || this.#orphans.has(msgId);
  }

  /** Adds a cell whose request is about to be sent; it leaves when it settles. */
  add(cell: CellExecution): void {
    this.#cells.set(cell.msgId, cell);
    cell.onSettled(() => this.#cells.delete(cell.msgId));
  }

  /** Hands an iopub message to the cell it belongs to (`parentId`), or counts an orphan's idle. */
  iopub(msg: JupyterMessage, parentId: string): void {
    const cell = this.#cells.get(parentId);
    if (cell) {
      if (cell.iopub(msg)) this.#complete(cell);
      else if (msg.header.msg_type === 'status' && cell.idle && !cell.replied) this.#awaitReply(cell);
    } else if (this.#orphans.size > 0 && msg.content.execution_state === 'idle') {
      this.#orphanSaw(parentId, 'idle');
    }
  }

  /** Hands an `execute_reply` to the cell it answers (`parentId`), or counts an orphan's reply. */
  reply(msg: JupyterMessage, parentId: string): void {
    const cell = this.#cells.get(parentId);
    if (cell) {
      if (cell.reply(msg)) this.#complete(cell);
      else this.#awaitIdle(cell);
    } else if (this.#orphans.size > 0) {
      this.#orphanSaw(parentId, 'reply');
    }
  }

  /** The channels socket dropped: every cell in flight may lose output across the reconnect. */
  markCrossedReconnect(): void {
    for (const cell of this.#cells.values()) cell.markCrossedReconnect();
  }

  /**
   * The channels socket reopened and `probeId` (a `kernel_info_request` on shell) was sent after every request
   * queued so far. The server does not replay what it wrote to a socket it had not yet noticed was dead, so the
   * reply and idle of a cell may be gone for good; the kernel answers shell requests in order, so once the probe's
   * reply is in (`probeReplied()`), a cell sent before it whose `execute_reply` is still missing after `replyGraceMs`
   * of silence settles as a protocol error with `outputDropped`. Returns false when no cell awaits its reply.
   */
  probeSent(probeId: string): boolean {
    const unanswered = [...this.#cells.values()].filter((cell) => !cell.replied);
    if (unanswered.length === 0) return false;
    this.#probes.set(probeId, unanswered);
    for (const cell of unanswered) cell.onSettled(() => this.#forgetProbe(probeId, cell));
    return true;
  }

  /** Takes a `kernel_info_reply` to `parentId`; true when it answered a reconnect probe. */
  probeReplied(parentId: string): boolean {
    const cells = this.#probes.get(parentId);
    if (!cells) return false;
    this.#probes.delete(parentId);
    const graceMs = this.#opts.replyGraceMs;
    for (const cell of cells) {
      if (cell.settled || cell.replied) continue;
      // A cell that went idle already waits for its reply (`#awaitReply`).
      if (graceMs <= 0 || !cell.beginReplyWait()) continue;
      this.#graceFor(cell, graceMs, () => {
        // Healed by the journal: only the reply went with the socket; the cell settles at its idle, from its iopub.
        if (cell.healed) {
          if (cell.idle) cell.completeFromIopub();
          else if (cell.messages > 0) cell.endReplyWait();
          else this.#awaitFirstMessage(cell, graceMs);
          return;
        }
        cell.markLostMessage(
          `its execute_reply was lost across a reconnect of the channels socket (the kernel answered a kernel_info_request sent after it, and no reply came within ${graceMs} ms)`,
        );
        cell.markDropped();
        cell.complete();
      });
    }
    return true;
  }

  /**
   * A healed cell of which nothing came, though the kernel answered a request sent after it (it takes shell requests
   * in order, and publishes `busy` before it handles one): its request went with the dropped socket, unless its iopub
   * is still on the way. After another `graceMs` of silence with nothing of it, it settles as a protocol error with
   * `outputDropped`; never a wait without end.
   */
  #awaitFirstMessage(cell: CellExecution, graceMs: number): void {
    this.#graceFor(cell, graceMs, () => {
      if (cell.idle) {
        cell.completeFromIopub();
        return;
      }
      if (cell.messages > 0) {
        cell.endReplyWait();
        return;
      }
      cell.markLostMessage(
        `its execute_request was lost across a reconnect of the channels socket (the kernel answered a kernel_info_request sent after it, and nothing of the cell came within ${2 * graceMs} ms)`,
      );
      cell.markDropped();
      cell.complete();
    });
  }

  #forgetProbe(probeId: string, cell: CellExecution): void {
    const cells = this.#probes.get(probeId);
    if (!cells) return;
    const left = cells.filter((c) => c !== cell);
    if (left.length === 0) this.#probes.delete(probeId);
    else this.#probes.set(probeId, left);
  }

  /** The reconnect's gap was filled from the kernel's journal: the cells in flight lost nothing across it. */
  clearCrossedReconnect(): void {
    for (const cell of this.#cells.values()) cell.clearCrossedReconnect();
  }

  /** Output fell out of the kernel's journal before a reconnect could read it: every cell in flight may miss some. */
  markAllDropped(): void {
    for (const cell of this.#cells.values()) cell.markDropped();
  }

  /** Resolves every cell in flight as aborted (with `flags`) and stops waiting for orphans. */
  abortAll(flags: { cancelled?: boolean } = {}): void {
    for (const cell of [...this.#cells.values()]) cell.abort(flags);
    this.releaseOrphans();
  }

  /** Rejects every cell in flight with `error` and stops waiting for orphans. */
  failAll(error: unknown): void {
    for (const cell of [...this.#cells.values()]) cell.fail(error);
    this.releaseOrphans();
  }

  /**
   * Keeps waiting for the reply and idle of a cell that was just cancelled; `done` is called once both came (or
   * `releaseOrphans()` gave up on them). Returns the function that forgets the orphan.
   */
  adoptOrphan(cell: CellExecution, done: () => void): () => void {
    const msgId = cell.msgId;
    this.#orphans.set(msgId, { replied: cell.replied, idle: cell.idle, done });
    return () => this.#orphans.delete(msgId);
  }

  /**
   * A frame was dropped unread (larger than `maxFrameBytes`): it most likely belonged to the running cell, and when
   * it closed the socket the messages behind it may be gone too. The running cell is marked with the protocol error
   * and `outputDropped`, and — unless its reply and idle still come — settles once the socket has been open and
   * silent for `replyGraceMs`. Returns that cell, if any.
   */
  lostFrame(message: string): CellExecution | undefined {
    const cell = this.running;
    if (!cell) return undefined;
    cell.markProtocolError(message);
    cell.markDropped();
    const graceMs = this.#opts.replyGraceMs;
    if (graceMs > 0 && cell.beginReplyWait()) this.#graceFor(cell, graceMs, () => cell.complete());
    return cell;
  }

  /** Stops waiting for every orphan (the kernel restarted, died or was shut down). */
  releaseOrphans(): void {
    for (const orphan of this.#orphans.values()) orphan.done();
  }

  #orphanSaw(parentId: string, kind: 'reply' | 'idle'): void {
    const orphan = this.#orphans.get(parentId);
    if (!orphan) return;
    if (kind === 'reply') orphan.replied = true;
    else orphan.idle = true;
    if (orphan.replied && orphan.idle) orphan.done();
  }

  /**
   * A cell got its reply and its idle. If the socket dropped meanwhile and the kernel's message numbers show a
   * hole since the request, the server lost output around the drop (see `MessageSequence`): the result says so.
   */
  #complete(cell: CellExecution): void {
    if (cell.crossedReconnect && this.#opts.sequence.missingSince(cell.sequenceMark) > 0) cell.markDropped();
    cell.complete();
  }

  /**
   * The reply came first: waits for the idle while messages keep arriving, and completes the cell as
   * `outputDropped` once the socket has been silent for `idleGraceMs` (a server that fell behind lost the idle).
   */
  #awaitIdle(cell: CellExecution): void {
    const graceMs = this.#opts.idleGraceMs;
    if (graceMs <= 0) return;
    this.#graceFor(cell, graceMs, () => {
      cell.markDropped();
      this.#complete(cell);
    });
  }

  /**
   * The idle came first: waits `replyGraceMs` for the reply (longer while messages keep arriving or the socket is
   * reopening), then settles the cell with the missing-reply error (ipykernel goes idle without a reply when its
   * handler fails).
   */
  #awaitReply(cell: CellExecution): void {
    const graceMs = this.#opts.replyGraceMs;
    if (graceMs <= 0 || !cell.beginReplyWait()) return;
    this.#graceFor(cell, graceMs, () => (cell.healed ? cell.completeFromIopub() : cell.completeWithoutReply(graceMs)));
  }

  #graceFor(cell: CellExecution, graceMs: number, settle: () => void): void {
    const wait = afterSilence({
      clock: this.#opts.clock,
      graceMs,
      source: this.#opts.socket,
      stillWaiting: () => !cell.settled,
      onSilent: () => {
        settle();
        this.#opts.onGraceSettled();
      },
    });
    cell.onSettled(() => wait.cancel());
  }
}
