import type { Output } from '@kernelwarden/core';
import type { CodeCell, JsonObject, NotebookCell, NotebookOutput } from './types.js';

/** The parts of a kernel message that outputs are built from. */
export interface KernelMessage {
  channel?: string;
  header: { msg_type: string; date?: unknown; msg_id?: string };
  content: JsonObject;
}

/** The keys nbclient records a cell's timing under, in `metadata.execution`. */
export const TIMING_KEYS = {
  busy: 'iopub.status.busy',
  executeInput: 'iopub.execute_input',
  idle: 'iopub.status.idle',
  reply: 'shell.execute_reply',
} as const;

const asObject = (v: unknown): JsonObject =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as JsonObject) : {};

/**
 * A timestamp as nbclient writes it: `YYYY-MM-DDTHH:MM:SS.ffffffZ` from the message header's date, or the current UTC
 * time when the header has none.
 */
export function nbclientTimestamp(date: unknown, now: () => Date = () => new Date()): string {
  if (typeof date === 'string') {
    const m = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?/.exec(date);
    if (m) return `${m[1]}T${m[2]}.${(m[3] ?? '').padEnd(6, '0').slice(0, 6)}Z`;
  }
  const iso = now().toISOString(); // 2026-01-01T00:00:00.000Z
  return `${iso.slice(0, 23)}000Z`;
}

/** nbformat's `output_from_msg`: the output an iopub message makes, or undefined for other messages. */
export function outputFromMessage(msgType: string, content: JsonObject): NotebookOutput | undefined {
  switch (msgType) {
    case 'execute_result':
      return {
        output_type: 'execute_result',
        metadata: asObject(content.metadata),
        data: asObject(content.data),
        execution_count: typeof content.execution_count === 'number' ? content.execution_count : null,
      };
    case 'stream':
      return { output_type: 'stream', name: String(content.name ?? 'stdout'), text: String(content.text ?? '') };
    case 'display_data':
      return { output_type: 'display_data', metadata: asObject(content.metadata), data: asObject(content.data) };
    case 'error':
      return {
        output_type: 'error',
        ename: String(content.ename ?? ''),
        evalue: String(content.evalue ?? ''),
        traceback: Array.isArray(content.traceback) ? content.traceback.map(String) : [],
      };
    default:
      return undefined;
  }
}

/** The nbformat output of one of core's `Output`s (what `ExecuteResult.outputs` and `onOutput` carry). */
export function outputFromCore(output: Output): NotebookOutput {
  switch (output.type) {
    case 'stream':
      return { output_type: 'stream', name: output.name, text: output.text };
    case 'display_data':
      return { output_type: 'display_data', data: { ...output.data }, metadata: { ...output.metadata } };
    case 'execute_result':
      return {
        output_type: 'execute_result',
        data: { ...output.data },
        metadata: { ...output.metadata },
        execution_count: output.executionCount ?? null,
      };
    case 'error':
      return { output_type: 'error', ename: output.ename, evalue: output.evalue, traceback: [...output.traceback] };
  }
}

// nbclient's regular expressions for `coalesce_streams` (Python's `.` is JavaScript's `[^\n]`).
const CARRIAGE_RETURN = /[^\n]*\r(?=[^\n])/g;

/**
 * nbclient's `coalesce_streams`: every stream's text merged into that stream's first output, carriage returns not
 * followed by a newline applied, and a stderr output directly followed by a stdout output swapped.
 */
export function coalesceStreams(outputs: NotebookOutput[]): NotebookOutput[] {
  if (outputs.length === 0) return outputs;
  const merged: NotebookOutput[] = [];
  const streams = new Map<string, Extract<NotebookOutput, { output_type: 'stream' }>>();
  for (const out of outputs) {
    if (out.output_type === 'stream') {
      const first = streams.get(out.name);
      if (first) first.text += out.text;
      else {
        merged.push(out);
        streams.set(out.name, out);
      }
    } else merged.push(out);
  }
  // nbclient's backspace pass never runs (its loop starts with equal lengths); only carriage returns are applied.
  for (const out of streams.values()) out.text = out.text.replace(CARRIAGE_RETURN, '');
  for (let i = 0; i < merged.length; i++) {
    const out = merged[i]!;
    const next = merged[i + 1];
    if (
      out.output_type === 'stream' &&
      out.name === 'stderr' &&
      next?.output_type === 'stream' &&
      next.name === 'stdout'
    ) {
      merged.splice(i + 1, 1);
      merged.splice(i, 0, next);
    }
  }
  return merged;
}

/**
 * Builds a notebook's outputs from kernel messages exactly as nbclient's `NotebookClient` does: one output per
 * output message; `execute_result` with the kernel's count; `update_display_data` and any output with a display id
 * rewriting every earlier output with that id, in any cell; `clear_output` at once, or (with `wait`) just before the
 * next output; the cell's execution count and timing from `execute_input`, `status` and `execute_reply`.
 *
 * One instance per run: display ids live across cells.
 */
export class NotebookOutputs {
  /** display id → cell index → indices of the outputs that showed it. */
  readonly #displays = new Map<string, Map<number, number[]>>();
  readonly #cells: readonly NotebookCell[];
  readonly #now: () => Date;
  readonly #recordTiming: boolean;

  /** `recordTiming: false` leaves each cell's `metadata.execution` as it was, as nbclient's `record_timing` does. */
  constructor(cells: readonly NotebookCell[], options: { now?: () => Date; recordTiming?: boolean } = {}) {
    this.#cells = cells;
    this.#now = options.now ?? (() => new Date());
    this.#recordTiming = options.recordTiming ?? true;
  }

  /** Starts cell `index`: its outputs emptied and (when timing is recorded) its `metadata.execution` reset, as nbclient does. */
  begin(index: number): CellOutputs {
    const cell = this.#cells[index] as CodeCell;
    if (this.#recordTiming) cell.metadata.execution = {};
    cell.outputs = [];
    return new CellOutputs(this, cell, index, this.#now, this.#recordTiming);
  }

  /** Rewrites every output shown under `displayId` with the data and metadata of `content`. */
  updateDisplay(displayId: string, content: JsonObject): void {
    const places = this.#displays.get(displayId);
    if (!places) return;
    for (const [cellIndex, indices] of places) {
      const outputs = (this.#cells[cellIndex] as CodeCell).outputs;
      for (const i of indices) {
        const out = outputs[i];
        if (out && (out.output_type === 'display_data' || out.output_type === 'execute_result')) {
          out.data = asObject(content.data);
          out.metadata = asObject(content.metadata);
        }
      }
    }
  }

  /** Notes that output `outputIndex` of cell `cellIndex` shows `displayId`. */
  recordDisplay(displayId: string, cellIndex: number, outputIndex: number): void {
    let places = this.#displays.get(displayId);
    if (!places) {
      places = new Map();
      this.#displays.set(displayId, places);
    }
    let indices = places.get(cellIndex);
    if (!indices) {
      indices = [];
      places.set(cellIndex, indices);
    }
    indices.push(outputIndex);
  }

  /** Forgets the display ids shown in cell `cellIndex` (its outputs were cleared). */
  clearDisplays(cellIndex: number): void {
    for (const places of this.#displays.values()) if (places.has(cellIndex)) places.set(cellIndex, []);
  }
}

/** One running cell's side of `NotebookOutputs`. */
export class CellOutputs {
  readonly #run: NotebookOutputs;
  readonly #cell: CodeCell;
  readonly #index: number;
  readonly #now: () => Date;
  readonly #recordTiming: boolean;
  #clearBeforeNext = false;
  /** Message ids already handled (a socket reconnect may replay some). */
  readonly #seen = new Set<string>();
  /** True once a message of the kernel arrived (the outputs then come from messages, not from `Output`s). */
  fromMessages = false;

  constructor(run: NotebookOutputs, cell: CodeCell, index: number, now: () => Date, recordTiming = true) {
    this.#run = run;
    this.#cell = cell;
    this.#index = index;
    this.#now = now;
    this.#recordTiming = recordTiming;
  }

  get cell(): CodeCell {
    return this.#cell;
  }

  #timing(key: string, date: unknown): void {
    if (!this.#recordTiming) return;
    const execution = asObject(this.#cell.metadata.execution);
    execution[key] = nbclientTimestamp(date, this.#now);
    this.#cell.metadata.execution = execution;
  }

  /** Records a timing key with the current time (for kernels whose messages cannot be seen). */
  stamp(key: string): void {
    this.#timing(key, undefined);
  }

  /** Handles one message of the cell: an iopub message, or its shell `execute_reply`. */
  message(msg: KernelMessage): void {
    const id = msg.header.msg_id;
    if (typeof id === 'string') {
      if (this.#seen.has(id)) return;
      this.#seen.add(id);
    }
    this.fromMessages = true;
    const msgType = msg.header.msg_type;
    const content = msg.content;
    if (msgType === 'execute_reply') {
      this.#timing(TIMING_KEYS.reply, msg.header.date);
      return;
    }
    const transient = content.transient;
    const displayId =
      transient !== null && typeof transient === 'object' ? (transient as JsonObject).display_id : undefined;
    const hasDisplayId = typeof displayId === 'string' && displayId !== '';
    if (
      hasDisplayId &&
      (msgType === 'execute_result' || msgType === 'display_data' || msgType === 'update_display_data')
    ) {
      this.#run.updateDisplay(displayId, content);
    }
    if (
      'execution_count' in content &&
      (typeof content.execution_count === 'number' || content.execution_count === null)
    ) {
      this.#cell.execution_count = content.execution_count;
    }
    if (msgType === 'status') {
      if (content.execution_state === 'idle') this.#timing(TIMING_KEYS.idle, msg.header.date);
      else if (content.execution_state === 'busy') this.#timing(TIMING_KEYS.busy, msg.header.date);
      return;
    }
    if (msgType === 'execute_input') {
      this.#timing(TIMING_KEYS.executeInput, msg.header.date);
      return;
    }
    if (msgType === 'clear_output') {
      if (content.wait) this.#clearBeforeNext = true;
      else this.#clear();
      return;
    }
    if (msgType === 'update_display_data' || msgType.startsWith('comm')) return;
    const out = outputFromMessage(msgType, content);
    if (out) this.#append(out, hasDisplayId ? displayId : undefined);
  }

  /** Adds an output that came as one of core's `Output`s (a kernel whose messages cannot be seen). */
  output(output: Output): void {
    this.#append(outputFromCore(output), undefined);
  }

  #clear(): void {
    this.#cell.outputs.length = 0;
    this.#run.clearDisplays(this.#index);
  }

  #append(out: NotebookOutput, displayId: string | undefined): void {
    if (this.#clearBeforeNext) {
      this.#clear();
      this.#clearBeforeNext = false;
    }
    if (displayId !== undefined) this.#run.recordDisplay(displayId, this.#index, this.#cell.outputs.length);
    this.#cell.outputs.push(out);
  }
}
