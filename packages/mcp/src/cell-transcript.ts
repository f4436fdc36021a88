import { type ExecuteResult, type Output, stripAnsi } from '@kernelwarden/core';
import { HeadTailText } from './text-cap.js';
import type { ResolvedKernelToolOptions } from './tool-options.js';

/** One item of a tool result: text, or an image as base64 (MCP's `ImageContent`). */
export type KernelToolContent = { type: 'text'; text: string } | { type: 'image'; data: string; mimeType: string };

/**
 * What a kernel tool returns: MCP `CallToolResult` content, and `isError` for an exception, a timeout, a reset or a
 * kernel that could not run the cell.
 */
export interface KernelToolResult {
  content: KernelToolContent[];
  isError: boolean;
  /**
   * Set on an answer given while its cell still runs (`run_code` past `max_wait_seconds`, `check_background`
   * before the end): the id to follow it with, and `status: 'running'`.
   */
  structuredContent?: { exec_id: string; status: 'running' } | undefined;
}

/** Image types that go to the model as images; others are named in the text. */
const IMAGE_TYPES = ['image/png', 'image/jpeg'] as const;

type TranscriptLimits = Pick<ResolvedKernelToolOptions, 'maxTextChars' | 'maxImages' | 'maxImageBytes'>;

/**
 * Collects one cell's outputs, in arrival order, into what a model should see: stream text, results' `text/plain`
 * and tracebacks without colour codes as one text capped to its head and tail, and PNG/JPEG images capped in count
 * and size, with a line for each image left out.
 *
 * Hand `onOutput` to the execution, then call `finish()`.
 */
export class CellTranscript {
  readonly #limits: TranscriptLimits;
  readonly #text: HeadTailText;
  readonly #images: { data: string; mimeType: string }[] = [];
  readonly #leftOut: string[] = [];
  #sawError = false;

  constructor(limits: TranscriptLimits) {
    this.#limits = limits;
    this.#text = new HeadTailText(limits.maxTextChars);
  }

  /** Characters of text seen so far (before the cap). */
  get textLength(): number {
    return this.#text.length;
  }

  readonly onOutput = (output: Output): void => {
    if (output.type === 'stream') {
      this.#text.push(stripAnsi(output.text));
    } else if (output.type === 'error') {
      this.#pushError(output);
    } else {
      this.#pushRich(output.data);
    }
  };

  /** Adds what the result holds that never came through `onOutput` (an error made by the session itself). */
  addResult(result: ExecuteResult): void {
    if (result.error && !this.#sawError) this.#pushError(result.error);
  }

  /**
   * The tool result: `preface` on its own paragraph, the text (or `(no output)`), then `notice` on its own
   * paragraph, then the images. `isError` is as given.
   */
  finish(opts: { isError: boolean; notice?: string | undefined; preface?: string | undefined }): KernelToolResult {
    const parts = [this.#text.render()];
    if (this.#leftOut.length > 0) parts.push(this.#leftOut.join('\n'));
    if (opts.notice) parts.push(opts.notice);
    let text = parts.filter((p) => p.length > 0).join('\n\n');
    if (text.length === 0 && this.#images.length === 0) text = '(no output)';
    if (opts.preface) text = `${opts.preface}\n\n${text}`;
    const content: KernelToolContent[] = [];
    if (text.length > 0) content.push({ type: 'text', text });
    for (const image of this.#images) content.push({ type: 'image', ...image });
    return { content, isError: opts.isError };
  }

  #pushError(error: { ename: string; evalue: string; traceback: string[] }): void {
    this.#sawError = true;
    const traceback = stripAnsi(error.traceback.join('\n')).trimEnd();
    const head = `${error.ename}: ${error.evalue}`;
    // IPython's traceback ends with "ename: evalue"; R's is often empty. Make sure name and message are there.
    const text = traceback.length === 0 ? head : traceback.includes(error.ename) ? traceback : `${traceback}\n${head}`;
    this.#separate();
    this.#text.push(`${text}\n`);
  }

  #pushRich(data: Record<string, unknown>): void {
    const mimeType = IMAGE_TYPES.find((type) => typeof data[type] === 'string');
    const plain = typeof data['text/plain'] === 'string' ? stripAnsi(data['text/plain']) : undefined;
    if (mimeType) {
      const base64 = (data[mimeType] as string).replace(/\s+/g, '');
      const bytes = Math.floor((base64.length * 3) / 4);
      const n = this.#images.length + this.#leftOut.length + 1;
      if (this.#images.length >= this.#limits.maxImages) {
        this.#leftOut.push(
          `[image ${n} (${mimeType}, ${kib(bytes)}) left out: at most ${this.#limits.maxImages} per result]`,
        );
      } else if (bytes > this.#limits.maxImageBytes) {
        this.#leftOut.push(
          `[image ${n} (${mimeType}, ${kib(bytes)}) left out: larger than the ${kib(this.#limits.maxImageBytes)} cap]`,
        );
      } else {
        this.#images.push({ data: base64, mimeType });
        return;
      }
    }
    if (plain !== undefined) {
      this.#separate();
      this.#text.push(`${plain}\n`);
      return;
    }
    const types = Object.keys(data).filter((type) => type !== mimeType);
    if (!mimeType && types.length > 0) {
      this.#separate();
      this.#text.push(`[${types.join(', ')} output not shown]\n`);
    }
  }

  /** Output that follows stream text not ending in a newline starts on its own line. */
  #separate(): void {
    if (!this.#text.atLineStart) this.#text.push('\n');
  }
}

function kib(bytes: number): string {
  return bytes >= 1_048_576 ? `${(bytes / 1_048_576).toFixed(1)} MiB` : `${Math.ceil(bytes / 1024)} KiB`;
}
