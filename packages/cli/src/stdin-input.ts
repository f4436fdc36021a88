import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';
import type { InputRequest } from '@kernelwarden/core';
import type { Language } from './args.js';
import type { TextSink } from './output-printer.js';
import { terminalSafe } from './terminal-text.js';

/** What ipykernel turns into `EOFError` in `input()`; R's `readline()` gets an empty line at end of input. */
export const PYTHON_EOF = '\x04';

/**
 * How long a prompt waits for the cell's earlier output: the kernel flushes its stdout before it asks, but that
 * output comes over another channel and may arrive just after the request.
 */
export const PROMPT_SETTLE_MS = 50;

/** The answer a kernel gets at end of input: `EOFError` for Python, an empty line for R. */
export function endOfInput(language: Language): string {
  return language === 'python' ? PYTHON_EOF : '';
}

/** The longest line kept whole: a longer one (a stream without newlines) is handed over in pieces of this size. */
const MAX_LINE_CHARS = 16 * 1024 * 1024;

/**
 * Reads standard input a line at a time, lazily: nothing is read until the first line is asked for, and reading
 * pauses while a line is waiting to be asked for, so an endless input costs at most one line of memory.
 */
export class LineReader {
  readonly #stream: NodeJS.ReadableStream;
  readonly #lines: string[] = [];
  #partial = '';
  #ended = false;
  #started = false;
  #waiting: ((line: string | undefined) => void) | undefined;
  readonly #onData = (chunk: Buffer | string) => {
    const text = this.#partial + (typeof chunk === 'string' ? chunk : chunk.toString('utf8'));
    const parts = text.split('\n');
    this.#partial = parts.pop() ?? '';
    this.#lines.push(...parts.map((line) => line.replace(/\r$/, '')));
    while (this.#partial.length > MAX_LINE_CHARS) {
      this.#lines.push(this.#partial.slice(0, MAX_LINE_CHARS));
      this.#partial = this.#partial.slice(MAX_LINE_CHARS);
    }
    this.#deliver();
    if (!this.#waiting) this.#stream.pause();
  };
  readonly #onEnd = () => {
    this.#ended = true;
    if (this.#partial !== '') this.#lines.push(this.#partial);
    this.#partial = '';
    this.#deliver();
  };

  constructor(stream: NodeJS.ReadableStream) {
    this.#stream = stream;
  }

  /** The next line without its newline, or undefined at end of input. */
  next(): Promise<string | undefined> {
    if (!this.#started) {
      this.#started = true;
      const readable = this.#stream as NodeJS.ReadableStream & { readableEnded?: boolean };
      if (readable.readableEnded) this.#ended = true;
      else {
        this.#stream.on('data', this.#onData);
        this.#stream.on('end', this.#onEnd);
        this.#stream.on('error', this.#onEnd);
        this.#stream.resume();
      }
    }
    return new Promise((resolve) => {
      this.#waiting = resolve;
      this.#deliver();
    });
  }

  #deliver(): void {
    const waiting = this.#waiting;
    if (!waiting) return;
    if (this.#lines.length > 0) {
      this.#waiting = undefined;
      waiting(this.#lines.shift());
      return;
    }
    if (this.#ended) {
      this.#waiting = undefined;
      waiting(undefined);
      return;
    }
    // Lines are read only while one is asked for.
    this.#stream.resume();
  }

  /** Stops reading; a pending `next()` gets end of input. */
  close(): void {
    if (this.#started) {
      this.#stream.off('data', this.#onData);
      this.#stream.off('end', this.#onEnd);
      this.#stream.off('error', this.#onEnd);
      this.#stream.pause();
    }
    this.#ended = true;
    this.#deliver();
  }
}

/** A sink that drops everything: the echo of a password. */
class Muted extends Writable {
  override _write(_chunk: unknown, _encoding: string, done: () => void): void {
    done();
  }
}

/**
 * Answers a cell's `input()` / `getpass()` / R `readline()` from the command's standard input, as the interpreter
 * would: on a terminal, a line edited there (a password without echo; Ctrl-D on an empty line is end of input,
 * Ctrl-C calls `onInterrupt`); from a pipe or a file, the next line; at end of input, `EOFError` in Python and an
 * empty line in R. The prompt goes to stdout (a password's to stderr), through the terminal filter.
 */
export class StdinInput {
  readonly #stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  readonly #stdout: TextSink;
  readonly #stderr: TextSink;
  readonly #onInterrupt: () => void;
  #lines: LineReader | undefined;
  #closed = false;

  constructor(opts: {
    stdin: NodeJS.ReadableStream & { isTTY?: boolean };
    stdout: TextSink;
    stderr: TextSink;
    /** Ctrl-C typed at a terminal prompt (the terminal is in raw mode then, so no SIGINT is sent). */
    onInterrupt: () => void;
    /** True when standard input was the script itself (`run -`): every request gets end of input. */
    consumed?: boolean;
  }) {
    this.#stdin = opts.stdin;
    this.#stdout = opts.stdout;
    this.#stderr = opts.stderr;
    this.#onInterrupt = opts.onInterrupt;
    this.#closed = opts.consumed === true;
  }

  /** The answer to `request` from a kernel of `language`. */
  async answer(request: InputRequest, language: Language): Promise<string> {
    if (this.#closed) return endOfInput(language);
    await new Promise((resolve) => setTimeout(resolve, PROMPT_SETTLE_MS));
    const sink = request.password ? this.#stderr : this.#stdout;
    const prompt = terminalSafe(request.prompt, { colors: sink.isTTY === true });
    if (this.#stdin.isTTY === true) {
      const line = await this.#terminalLine(prompt, request.password, sink);
      return line ?? endOfInput(language);
    }
    if (prompt !== '') sink.write(prompt);
    this.#lines ??= new LineReader(this.#stdin);
    const line = await this.#lines.next();
    return line ?? endOfInput(language);
  }

  #terminalLine(prompt: string, password: boolean, sink: TextSink): Promise<string | undefined> {
    return new Promise((resolve) => {
      if ((this.#stdin as { readableEnded?: boolean }).readableEnded) {
        resolve(undefined);
        return;
      }
      // The interface puts the terminal in raw mode (no echo) before the prompt shows: a password typed the moment
      // its prompt appears is never echoed by the terminal.
      const rl = createInterface({
        input: this.#stdin,
        output: password ? new Muted() : (sink as unknown as NodeJS.WritableStream),
        terminal: true,
      });
      if (password) sink.write(prompt);
      let answered = false;
      rl.on('line', (line) => {
        answered = true;
        rl.close();
        if (password) sink.write('\n');
        resolve(line);
      });
      rl.on('close', () => {
        if (!answered) {
          if (password) sink.write('\n');
          resolve(undefined);
        }
      });
      rl.on('SIGINT', () => {
        answered = true;
        rl.close();
        sink.write('\n');
        this.#onInterrupt();
        resolve('');
      });
      if (!password) {
        rl.setPrompt(prompt);
        rl.prompt();
      }
    });
  }

  /** Stops reading standard input (the command is ending). */
  close(): void {
    this.#closed = true;
    this.#lines?.close();
  }
}
