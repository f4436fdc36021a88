import type { ExecuteError, ExecuteOptions, ExecuteResult, Output } from '@kernelwarden/core';
import type { JupyterMessage } from '@kernelwarden/jupyter-protocol';

/**
 * How long a cell waits for its `execute_reply` once the kernel went `idle` for it: ipykernel replies before it
 * goes idle, so a reply that has not come by then never will (its handler failed, e.g. on code with a NUL).
 */
export const DEFAULT_REPLY_GRACE_MS = 3000;

/** The `ename` of the error a cell settles with when its kernel went idle without replying. */
export const MISSING_REPLY_ENAME = 'KernelProtocolError';

/** How much of a cell's output a result keeps. Memory stays bounded by these, not by the cell's output size. */
export interface OutputCaps {
  /** Characters of stdout (and, separately, of stderr) kept. @defaultValue 1048576 (1 MiB) */
  maxStreamChars: number;
  /** Entries kept in `outputs` (consecutive stream chunks of one stream share an entry). @defaultValue 1000 */
  maxOutputs: number;
}

/** The caps used when `GatewayKernel.start()` is not given `outputCaps`. */
export const DEFAULT_OUTPUT_CAPS: OutputCaps = { maxStreamChars: 1_048_576, maxOutputs: 1000 };

const DROP_NOTICES = ['IOPub data rate exceeded', 'IOPub message rate exceeded'];

/** Chunks appended before they are joined into one string. */
const FOLD_EVERY = 512;

/**
 * Text built from many small chunks. `a += b` per chunk would keep one rope node per chunk alive until the string
 * is read (V8 cons strings): ~30 bytes per 5-byte line of a chatty cell, several times the capped text itself.
 * Chunks are joined every `FOLD_EVERY` instead, so memory stays close to the text's own size.
 */
class TextBuffer {
  #folded = '';
  #parts: string[] = [];
  length = 0;

  append(text: string): void {
    this.#parts.push(text);
    this.length += text.length;
    if (this.#parts.length >= FOLD_EVERY) this.#fold();
  }

  toString(): string {
    this.#fold();
    return this.#folded;
  }

  #fold(): void {
    if (this.#parts.length === 0) return;
    this.#folded += this.#parts.join('');
    this.#parts = [];
  }
}

/**
 * One running cell: collects its outputs under the caps and completes once both its `execute_reply` and its
 * `status: idle` arrived (in either order). Internal to the kernel.
 */
export class CellExecution {
  readonly msgId: string;
  readonly cellId: string;
  readonly opts: ExecuteOptions;
  replied = false;
  idle = false;
  /** The kernel went idle first and the reply grace is running. */
  awaitingReply = false;
  settled = false;
  status: ExecuteResult['status'] = 'ok';
  executionCount: number | undefined;
  error: ExecuteError | undefined;
  #stdout = new TextBuffer();
  #stderr = new TextBuffer();
  outputs: Output[] = [];
  truncated = false;
  stdinRequested = false;
  outputDropped = false;
  /** Where the kernel's message numbers stood when the request was sent (see `MessageSequence`). */
  sequenceMark: { source: string | undefined; max: number } | undefined;
  /** Messages of this cell received so far (iopub and reply). */
  messages = 0;
  /** The channels socket dropped while this cell was pending. */
  crossedReconnect = false;
  #caps: OutputCaps;
  #lastStream: Extract<Output, { type: 'stream' }> | undefined;
  /** The text of `#lastStream`, written into it when another entry follows or the cell completes. */
  #lastStreamText: TextBuffer | undefined;
  #onDropped: (() => void) | undefined;
  readonly #resolve: (result: ExecuteResult) => void;
  readonly #reject: (error: unknown) => void;
  /** Called once when the execution settles, whatever the way (cleans up listeners and timers). */
  onSettled: (() => void) | undefined;

  constructor(
    msgId: string,
    cellId: string,
    opts: ExecuteOptions,
    caps: OutputCaps,
    resolve: (result: ExecuteResult) => void,
    reject: (error: unknown) => void,
    onDropped?: () => void,
  ) {
    this.msgId = msgId;
    this.cellId = cellId;
    this.opts = opts;
    this.#caps = caps;
    this.#resolve = resolve;
    this.#reject = reject;
    this.#onDropped = onDropped;
  }

  /** Handles an iopub message whose parent is this cell; returns true when the cell is complete. */
  iopub(msg: JupyterMessage): boolean {
    this.messages++;
    const content = msg.content;
    switch (msg.header.msg_type) {
      case 'status':
        if (content.execution_state === 'idle') this.idle = true;
        break;
      case 'stream':
        this.#stream(content.name === 'stderr' ? 'stderr' : 'stdout', String(content.text ?? ''));
        break;
      case 'display_data':
      case 'update_display_data':
        this.#rich({
          type: 'display_data',
          data: asRecord(content.data),
          metadata: asRecord(content.metadata),
        });
        break;
      case 'execute_result':
        this.#rich({
          type: 'execute_result',
          data: asRecord(content.data),
          metadata: asRecord(content.metadata),
          executionCount: typeof content.execution_count === 'number' ? content.execution_count : undefined,
        });
        break;
      case 'error': {
        const error = toError(content);
        this.error ??= error;
        this.#rich({ type: 'error', ...error });
        break;
      }
      default:
        break;
    }
    return this.replied && this.idle;
  }

  /** Handles the cell's `execute_reply`; returns true when the cell is complete. */
  reply(msg: JupyterMessage): boolean {
    this.messages++;
    const content = msg.content;
    this.replied = true;
    if (typeof content.execution_count === 'number') this.executionCount = content.execution_count;
    if (content.status === 'error') {
      this.status = 'error';
      this.error ??= toError(content);
    } else if (content.status === 'abort' || content.status === 'aborted') {
      // IRkernel answers an interrupted cell with `abort` and no error message.
      this.status = 'aborted';
    } else {
      this.status = 'ok';
    }
    return this.replied && this.idle;
  }

  /** Resolves with the collected result. */
  complete(extra: Partial<ExecuteResult> = {}): void {
    if (this.settled) return;
    this.settled = true;
    this.onSettled?.();
    this.#closeStreamEntry();
    const result: ExecuteResult = {
      status: this.status,
      cellId: this.cellId,
      stdout: this.#stdout.toString(),
      stderr: this.#stderr.toString(),
      outputs: this.outputs,
      cancelled: false,
      timedOut: false,
      stdinRequested: this.stdinRequested,
      truncated: this.truncated,
      ...extra,
    };
    if (this.executionCount !== undefined) result.executionCount = this.executionCount;
    if (this.error !== undefined && result.status === 'error') result.error = this.error;
    if (this.outputDropped) result.outputDropped = true;
    this.#resolve(result);
  }

  /**
   * Settles the cell as an error because the kernel went idle for it and never sent its `execute_reply`: status
   * `'error'`, `error.ename` `'KernelProtocolError'`, and an `evalue` saying so.
   */
  completeWithoutReply(graceMs: number): void {
    this.status = 'error';
    const evalue = `the kernel went idle without replying to the cell (no execute_reply within ${graceMs} ms of its status: idle); it failed to handle the request, so the cell may not have run`;
    this.error = { ename: MISSING_REPLY_ENAME, evalue, traceback: [] };
    this.complete();
  }

  /** Records that the server dropped some of this cell's output (once; emits the kernel's event). */
  markDropped(): void {
    if (this.outputDropped) return;
    this.outputDropped = true;
    this.#onDropped?.();
  }

  /** Rejects (the kernel cannot answer any more). */
  fail(error: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.onSettled?.();
    this.#reject(error);
  }

  #emit(output: Output): void {
    const onOutput = this.opts.onOutput;
    if (!onOutput) return;
    try {
      onOutput(output);
    } catch {
      // a throwing listener must not break the protocol handling
    }
  }

  #stream(name: 'stdout' | 'stderr', text: string): void {
    if (
      name === 'stderr' &&
      !this.outputDropped &&
      text.includes('rate exceeded') &&
      DROP_NOTICES.some((n) => text.includes(n))
    ) {
      this.markDropped();
    }
    this.#emit({ type: 'stream', name, text });
    const kept = name === 'stdout' ? this.#stdout.length : this.#stderr.length;
    const room = this.#caps.maxStreamChars - kept;
    if (room <= 0) {
      if (text.length > 0) this.truncated = true;
      return;
    }
    let piece = text;
    if (piece.length > room) {
      piece = piece.slice(0, room);
      this.truncated = true;
    }
    if (name === 'stdout') this.#stdout.append(piece);
    else this.#stderr.append(piece);
    const last = this.#lastStream;
    if (last && last.name === name && this.outputs[this.outputs.length - 1] === last) {
      this.#lastStreamText?.append(piece);
      return;
    }
    this.#closeStreamEntry();
    if (this.outputs.length >= this.#caps.maxOutputs) {
      this.truncated = true;
      return;
    }
    const entry: Extract<Output, { type: 'stream' }> = { type: 'stream', name, text: '' };
    const entryText = new TextBuffer();
    entryText.append(piece);
    this.outputs.push(entry);
    this.#lastStream = entry;
    this.#lastStreamText = entryText;
  }

  /** Writes the open stream entry's text into it. */
  #closeStreamEntry(): void {
    if (this.#lastStream && this.#lastStreamText) this.#lastStream.text = this.#lastStreamText.toString();
    this.#lastStream = undefined;
    this.#lastStreamText = undefined;
  }

  #rich(output: Output): void {
    this.#closeStreamEntry();
    this.#emit(output);
    if (this.outputs.length >= this.#caps.maxOutputs) {
      this.truncated = true;
      return;
    }
    this.outputs.push(output);
  }
}

function asRecord(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : {};
}

function toError(content: Record<string, unknown>): ExecuteError {
  return {
    ename: String(content.ename ?? 'Error'),
    evalue: String(content.evalue ?? ''),
    traceback: Array.isArray(content.traceback) ? content.traceback.map(String) : [],
  };
}
