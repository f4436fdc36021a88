import { type ExecuteError, type ExecuteOptions, type ExecuteResult, emptyResult } from '@kernelwarden/core';
import type { JupyterMessage } from '@kernelwarden/jupyter-protocol';
import { CellOutput, type OutputCaps } from './cell-output.js';
import type { SequenceMark } from './message-sequence.js';

/**
 * The `ename` of the error a cell settles with when its kernel went idle without replying, or sent a malformed
 * message for it.
 */
export const MISSING_REPLY_ENAME = 'KernelProtocolError';

const DROP_NOTICES = ['IOPub data rate exceeded', 'IOPub message rate exceeded'];

/** What a new `CellExecution` is told. */
export interface CellExecutionInit {
  /** The `msg_id` of its `execute_request`. */
  msgId: string;
  cellId: string;
  /** The caller's options (`onOutput`, `onInput` are used). */
  opts: ExecuteOptions;
  caps: OutputCaps;
  /** Where the kernel's message numbers stood when the request was sent (see `MessageSequence`). */
  sequenceMark: SequenceMark;
  /** Called once when the cell learns that the server dropped some of its output. */
  onDropped?: () => void;
}

/**
 * One cell from its request to its result. It reads its own messages (`iopub`, `reply`), assembles its output
 * (`CellOutput`), and owns every way it can settle: `complete()` with what it collected, `abort()` when the caller
 * stopped waiting or the kernel restarted under it, `completeWithoutReply()` when the kernel went idle and never
 * replied, `fail()` when the kernel cannot answer. It settles once; later calls do nothing. Internal to the kernel.
 */
export class CellExecution {
  readonly msgId: string;
  readonly cellId: string;
  /** Resolves with the result, or rejects with the error of `fail()`. */
  readonly result: Promise<ExecuteResult>;
  readonly #opts: ExecuteOptions;
  readonly #output: CellOutput;
  readonly #sequenceMark: SequenceMark;
  readonly #onDropped: (() => void) | undefined;
  readonly #cleanups: (() => void)[] = [];
  #resolve!: (result: ExecuteResult) => void;
  #reject!: (error: unknown) => void;
  #settled = false;
  #replied = false;
  #idle = false;
  #awaitingReply = false;
  #messages = 0;
  #crossedReconnect = false;
  #healed = false;
  #status: ExecuteResult['status'] = 'ok';
  #executionCount: number | undefined;
  #error: ExecuteError | undefined;
  #stdinRequested = false;
  #outputDropped = false;
  #protocolError = false;

  constructor(init: CellExecutionInit) {
    this.msgId = init.msgId;
    this.cellId = init.cellId;
    this.#opts = init.opts;
    this.#sequenceMark = init.sequenceMark;
    this.#onDropped = init.onDropped;
    this.#output = new CellOutput(init.caps, init.opts.onOutput);
    this.result = new Promise<ExecuteResult>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
  }

  /** True once the cell resolved or rejected. */
  get settled(): boolean {
    return this.#settled;
  }

  /** Its `execute_reply` arrived. */
  get replied(): boolean {
    return this.#replied;
  }

  /** Its `status: idle` arrived. */
  get idle(): boolean {
    return this.#idle;
  }

  /** Messages of this cell received so far (iopub and reply). */
  get messages(): number {
    return this.#messages;
  }

  /** The channels socket dropped while this cell was pending. */
  get crossedReconnect(): boolean {
    return this.#crossedReconnect;
  }

  /** Where the kernel's message numbers stood when its request was sent. */
  get sequenceMark(): SequenceMark {
    return this.#sequenceMark;
  }

  /** The caller's stdin answerer, when it gave one. */
  get onInput(): ExecuteOptions['onInput'] {
    return this.#opts.onInput;
  }

  /** Registers `cleanup` to run once when the cell settles, whatever the way (listeners, timers). */
  onSettled(cleanup: () => void): void {
    if (this.#settled) cleanup();
    else this.#cleanups.push(cleanup);
  }

  /** Handles an iopub message whose parent is this cell; returns true when the cell has both reply and idle. */
  iopub(msg: JupyterMessage): boolean {
    this.#messages++;
    const content = msg.content;
    switch (msg.header.msg_type) {
      case 'status':
        if (content.execution_state === 'idle') this.#idle = true;
        break;
      case 'stream':
        this.#stream(content.name === 'stderr' ? 'stderr' : 'stdout', String(content.text ?? ''));
        break;
      case 'display_data':
      case 'update_display_data':
        this.#output.rich({ type: 'display_data', data: asRecord(content.data), metadata: asRecord(content.metadata) });
        break;
      case 'execute_result':
        this.#output.rich({
          type: 'execute_result',
          data: asRecord(content.data),
          metadata: asRecord(content.metadata),
          executionCount: typeof content.execution_count === 'number' ? content.execution_count : undefined,
        });
        break;
      case 'error': {
        const error = toError(content);
        this.#error ??= error;
        this.#output.rich({ type: 'error', ...error });
        break;
      }
      default:
        break;
    }
    return this.#replied && this.#idle;
  }

  /** Handles the cell's `execute_reply`; returns true when the cell has both reply and idle. */
  reply(msg: JupyterMessage): boolean {
    this.#messages++;
    const content = msg.content;
    this.#replied = true;
    if (typeof content.execution_count === 'number') this.#executionCount = content.execution_count;
    if (content.status === 'error') {
      this.#status = 'error';
      this.#error ??= toError(content);
    } else if (content.status === 'abort' || content.status === 'aborted') {
      // IRkernel answers an interrupted cell with `abort` and no error message.
      this.#status = 'aborted';
    } else {
      this.#status = 'ok';
    }
    if (this.#protocolError) this.#status = 'error';
    return this.#replied && this.#idle;
  }

  /**
   * Notes that the kernel sent a message for this cell that broke the protocol (it was dropped): the cell goes on
   * and settles with status `'error'` and, unless it already had an error, `error.ename` `'KernelProtocolError'`.
   */
  markProtocolError(message: string): void {
    this.markLostMessage(`the kernel sent a malformed message for the cell, which was dropped: ${message}`);
  }

  /**
   * Notes that a message of this cell the protocol promises (its request, its reply) was lost on the way, `evalue`
   * saying which and how it is known: the cell settles as {@link markProtocolError} says.
   */
  markLostMessage(evalue: string): void {
    if (this.#protocolError) return;
    this.#protocolError = true;
    this.#status = 'error';
    this.#error ??= { ename: MISSING_REPLY_ENAME, evalue, traceback: [] };
  }

  /** The reconnect's gap was filled from the kernel's journal: no output of this cell was lost across it. */
  clearCrossedReconnect(): void {
    if (this.#crossedReconnect) this.#healed = true;
    this.#crossedReconnect = false;
  }

  /** It crossed a drop of the socket whose gap the kernel's journal filled: its iopub messages are all in. */
  get healed(): boolean {
    return this.#healed;
  }

  /**
   * Settles a healed cell whose `execute_reply` was lost with the socket: its output is whole (the journal's), and its
   * status is the one its iopub said (`'error'` when it published an error).
   */
  completeFromIopub(): void {
    this.#resolveWith({ status: this.#protocolError || this.#error !== undefined ? 'error' : 'ok' });
  }

  /** Notes that the channels socket dropped while the cell was pending (its output may have a hole). */
  markCrossedReconnect(): void {
    this.#crossedReconnect = true;
  }

  /** Notes that the kernel asked for input during the cell. */
  markStdinRequested(): void {
    this.#stdinRequested = true;
  }

  /** Records that the server dropped some of this cell's output (once; tells `onDropped`). */
  markDropped(): void {
    if (this.#outputDropped) return;
    this.#outputDropped = true;
    this.#onDropped?.();
  }

  /** Starts the wait for a reply after the idle; false when that wait already runs. */
  beginReplyWait(): boolean {
    if (this.#awaitingReply) return false;
    this.#awaitingReply = true;
    return true;
  }

  /** Ends a wait for the reply without settling (the next idle starts another). */
  endReplyWait(): void {
    this.#awaitingReply = false;
  }

  /** Resolves with what the cell collected and the kernel's verdict. */
  complete(): void {
    this.#resolveWith({ status: this.#status });
  }

  /**
   * Resolves with status `'aborted'` and what the cell collected so far: the caller stopped waiting (`cancelled`,
   * maybe `timedOut`), or the kernel was restarted or shut down under it.
   */
  abort(flags: { cancelled?: boolean; timedOut?: boolean } = {}): void {
    this.#resolveWith({ status: 'aborted', ...flags });
  }

  /**
   * Settles the cell as an error because the kernel went idle for it and never sent its `execute_reply`: status
   * `'error'`, `error.ename` `'KernelProtocolError'`, and an `evalue` saying so.
   */
  completeWithoutReply(graceMs: number): void {
    this.#status = 'error';
    if (this.#protocolError) {
      // Its reply may be the message that was dropped: the protocol error says more.
      this.complete();
      return;
    }
    const evalue = `the kernel went idle without replying to the cell (no execute_reply within ${graceMs} ms of its status: idle); it failed to handle the request, so the cell may not have run`;
    this.#error = { ename: MISSING_REPLY_ENAME, evalue, traceback: [] };
    this.complete();
  }

  /** Rejects (the kernel cannot answer any more). */
  fail(error: unknown): void {
    if (!this.#settle()) return;
    this.#reject(error);
  }

  #resolveWith(fields: Partial<ExecuteResult>): void {
    if (!this.#settle()) return;
    const result = emptyResult(this.cellId, {
      ...this.#output.collected(),
      stdinRequested: this.#stdinRequested,
      ...fields,
    });
    if (this.#executionCount !== undefined) result.executionCount = this.#executionCount;
    if (this.#error !== undefined && result.status === 'error') result.error = this.#error;
    if (this.#outputDropped) result.outputDropped = true;
    this.#resolve(result);
  }

  /** Marks the cell settled and runs its cleanups; false when it already was. */
  #settle(): boolean {
    if (this.#settled) return false;
    this.#settled = true;
    for (const cleanup of this.#cleanups.splice(0)) cleanup();
    return true;
  }

  #stream(name: 'stdout' | 'stderr', text: string): void {
    if (
      name === 'stderr' &&
      !this.#outputDropped &&
      text.includes('rate exceeded') &&
      DROP_NOTICES.some((n) => text.includes(n))
    ) {
      this.markDropped();
    }
    this.#output.stream(name, text);
  }
}

export function asRecord(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : {};
}

export function toError(content: Record<string, unknown>): ExecuteError {
  return {
    ename: String(content.ename ?? 'Error'),
    evalue: String(content.evalue ?? ''),
    traceback: Array.isArray(content.traceback) ? content.traceback.map(String) : [],
  };
}
