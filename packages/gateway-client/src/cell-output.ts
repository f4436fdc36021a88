import type { ExecuteResult, Output } from '@kernelwarden/core';

/** How much of a cell's output a result keeps. Memory stays bounded by these, not by the cell's output size. */
export interface OutputCaps {
  /** Characters of stdout (and, separately, of stderr) kept. @defaultValue `DEFAULT_OUTPUT_CAPS.maxStreamChars` (1048576, 1 MiB) */
  maxStreamChars: number;
  /** Entries kept in `outputs` (consecutive stream chunks of one stream share an entry). @defaultValue `DEFAULT_OUTPUT_CAPS.maxOutputs` (1000) */
  maxOutputs: number;
  /**
   * Size kept of the rich outputs in `outputs` (`display_data`, `execute_result`, `error`) together, about their
   * JSON length: the characters of their strings (MIME data, metadata, keys, traceback lines). An output that would take
   * the total past it is left out (a later, smaller one that fits is kept); stream text has `maxStreamChars`.
   * @defaultValue `DEFAULT_OUTPUT_CAPS.maxOutputBytes` (33554432, 32 MiB)
   */
  maxOutputBytes: number;
}

/** The caps used when `GatewayKernel.start()` is not given `outputCaps`. */
export const DEFAULT_OUTPUT_CAPS: OutputCaps = {
  maxStreamChars: 1_048_576,
  maxOutputs: 1000,
  maxOutputBytes: 33_554_432,
};

/** Chunks appended before they are joined into one string. */
const FOLD_EVERY = 512;

/**
 * Text built from many small chunks. `a += b` per chunk would keep one rope node per chunk alive until the string
 * is read (V8 cons strings): ~30 bytes per 5-byte line of a chatty cell, several times the capped text itself.
 * Chunks are joined every `FOLD_EVERY` instead, so memory stays close to the text's own size.
 */
export class TextBuffer {
  #folded = '';
  #parts: string[] = [];
  /** Characters appended so far. */
  length = 0;

  /** Appends a chunk. */
  append(text: string): void {
    this.#parts.push(text);
    this.length += text.length;
    if (this.#parts.length >= FOLD_EVERY) this.#fold();
  }

  /** The whole text. */
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

type StreamOutput = Extract<Output, { type: 'stream' }>;

/**
 * The size of a parsed JSON value as `OutputCaps.maxOutputBytes` counts it — about its JSON length: a string's
 * characters plus 2, a key's plus 3, 8 for any other value — or a number above `limit` as soon as it passes it.
 * Iterative: a deeply nested value costs no stack, and the walk stops at the limit.
 */
export function sizeWithin(value: unknown, limit: number): number {
  let size = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const v = pending.pop();
    if (typeof v === 'string') {
      size += v.length + 2;
    } else if (v !== null && typeof v === 'object') {
      size += 8;
      if (Array.isArray(v)) {
        if (size + pending.length + v.length > limit) return Math.max(size, limit + 1);
        for (const item of v) pending.push(item);
      } else {
        for (const key in v) {
          size += key.length + 3;
          pending.push((v as Record<string, unknown>)[key]);
        }
      }
    } else {
      size += 8;
    }
    // Every value still pending counts at least 1 more.
    if (size + pending.length > limit) return Math.max(size, limit + 1);
  }
  return size;
}

/**
 * Where a cell's output is assembled: every output goes to `onOutput` as it arrives, and what the result keeps is
 * collected under the caps — stdout and stderr apart, consecutive chunks of one stream in one `outputs` entry, rich
 * outputs whole. Anything cut sets `truncated`.
 */
export class CellOutput {
  readonly #caps: OutputCaps;
  readonly #onOutput: ((output: Output) => void) | undefined;
  readonly #stdout = new TextBuffer();
  readonly #stderr = new TextBuffer();
  readonly #outputs: Output[] = [];
  /** The size (see `OutputCaps.maxOutputBytes`) of the rich outputs kept. */
  #richSize = 0;
  #truncated = false;
  #lastStream: StreamOutput | undefined;
  /** The text of `#lastStream`, written into it when another entry follows or the output is read. */
  #lastStreamText: TextBuffer | undefined;

  constructor(caps: OutputCaps, onOutput?: (output: Output) => void) {
    this.#caps = caps;
    this.#onOutput = onOutput;
  }

  /** Adds a chunk of stdout or stderr. */
  stream(name: 'stdout' | 'stderr', text: string): void {
    this.#emit({ type: 'stream', name, text });
    const buffer = name === 'stdout' ? this.#stdout : this.#stderr;
    const room = this.#caps.maxStreamChars - buffer.length;
    if (room <= 0) {
      if (text.length > 0) this.#truncated = true;
      return;
    }
    let piece = text;
    if (piece.length > room) {
      piece = piece.slice(0, room);
      this.#truncated = true;
    }
    buffer.append(piece);
    const last = this.#lastStream;
    if (last && last.name === name && this.#outputs[this.#outputs.length - 1] === last) {
      this.#lastStreamText?.append(piece);
      return;
    }
    this.#closeStreamEntry();
    if (this.#outputs.length >= this.#caps.maxOutputs) {
      this.#truncated = true;
      return;
    }
    const entry: StreamOutput = { type: 'stream', name, text: '' };
    const entryText = new TextBuffer();
    entryText.append(piece);
    this.#outputs.push(entry);
    this.#lastStream = entry;
    this.#lastStreamText = entryText;
  }

  /** Adds a display, an execute result or an error, kept whole. */
  rich(output: Exclude<Output, StreamOutput>): void {
    this.#closeStreamEntry();
    this.#emit(output);
    if (this.#outputs.length >= this.#caps.maxOutputs) {
      this.#truncated = true;
      return;
    }
    const room = this.#caps.maxOutputBytes - this.#richSize;
    const size = sizeWithin(output, room);
    if (size > room) {
      this.#truncated = true;
      return;
    }
    this.#richSize += size;
    this.#outputs.push(output);
  }

  /** What the result keeps so far: `stdout`, `stderr`, `outputs` and `truncated`. */
  collected(): Pick<ExecuteResult, 'stdout' | 'stderr' | 'outputs' | 'truncated'> {
    this.#closeStreamEntry();
    return {
      stdout: this.#stdout.toString(),
      stderr: this.#stderr.toString(),
      outputs: this.#outputs,
      truncated: this.#truncated,
    };
  }

  #emit(output: Output): void {
    if (!this.#onOutput) return;
    try {
      this.#onOutput(output);
    } catch {
      // a throwing listener must not break the protocol handling
    }
  }

  /** Writes the open stream entry's text into it. */
  #closeStreamEntry(): void {
    if (this.#lastStream && this.#lastStreamText) this.#lastStream.text = this.#lastStreamText.toString();
    this.#lastStream = undefined;
    this.#lastStreamText = undefined;
  }
}
