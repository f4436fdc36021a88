import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { InputRequest } from '@kernelwarden/core';
import type { Language, StackOptions } from './args.js';
import type { CliIo } from './cli-io.js';
import { createStack, type Stack } from './compose.js';
import { INDENT, inputState, nextIndent } from './continuation.js';
import { ExitCode } from './exit-code.js';
import { describeFailure } from './failure.js';
import { OutputPrinter } from './output-printer.js';
import {
  checkSourceText,
  DEFAULT_MAX_SOURCE_BYTES,
  hasInvalidBytes,
  InvalidSourceError,
  markInvalidUtf8,
} from './source-input.js';
import { Spinner } from './spinner.js';
import { endOfInput, PROMPT_SETTLE_MS } from './stdin-input.js';
import { terminalSafe } from './terminal-text.js';

/** A second Ctrl-C within this long of the first one kills and restarts the kernel. */
export const DOUBLE_INTERRUPT_MS = 2000;

const PROMPT: Record<Language, string> = { python: 'py> ', r: 'r> ' };
const CONTINUATION = '... ';

const REPL_HELP = `:py / :python  switch to Python      :r  switch to R
:help          this list            :quit (or Ctrl-D)  leave
Ctrl-C interrupts the running cell; Ctrl-C again within 2 s kills and restarts its kernel.`;

/** Opens the repl's stack with a spinner; a failure is said and its exit code returned instead. */
async function openStack(options: StackOptions, io: CliIo, spinner: Spinner): Promise<Stack | number> {
  try {
    spinner.start(
      options.gatewayUrl ? `connecting to ${options.gatewayUrl}…` : 'connecting to the embedded Jupyter gateway…',
    );
    const stack = await createStack(options, {
      env: io.env,
      onNotice: (message) => io.stderr.write(`kernelwarden: ${message}\n`),
      onKernelStarting: (language) => spinner.start(`starting the ${language === 'r' ? 'R' : 'Python'} kernel…`),
      onKernelStarted: () => spinner.stop(),
    });
    spinner.stop();
    return stack;
  } catch (error) {
    spinner.stop();
    const failure = describeFailure(error);
    io.stderr.write(`${terminalSafe(`kernelwarden repl: ${failure.message}`, { colors: false })}\n`);
    return failure.exitCode;
  }
}

/**
 * `kernelwarden repl`: a line-editing prompt on the stack. Python and R each keep their own kernel for the whole
 * session; Ctrl-C interrupts, a second Ctrl-C within 2 s aborts the cell so the watchdog kills and restarts it.
 */
export async function replCommand(options: StackOptions, io: CliIo): Promise<number> {
  const spinner = new Spinner(io.stderr);
  const stack = await openStack(options, io, spinner);
  if (typeof stack === 'number') return stack;
  return new Repl(options, io, stack, spinner).run();
}

/** One repl session on an open stack: its line reader, the cell being typed, the cell running. */
class Repl {
  readonly #options: StackOptions;
  readonly #io: CliIo;
  readonly #stack: Stack;
  readonly #spinner: Spinner;
  readonly #terminal: boolean;
  readonly #maxSourceBytes: number;
  /** Bytes that are not UTF-8 are marked (readline would make them U+FFFD silently) and their cell refused. */
  readonly #input: ReturnType<typeof markInvalidUtf8>;
  readonly #rl: ReturnType<typeof createInterface>;
  #language: Language;
  /** The indentation of the next block line after an empty line went back a level. */
  #dedentTo: string | undefined;
  #buffer: string[] = [];
  #running: AbortController | undefined;
  #lastInterruptAt = Number.NEGATIVE_INFINITY;
  /** Lines read and not yet handled; `sawIndent`: typed after the repl had typed that line's indentation. */
  readonly #queue: { text: string; sawIndent: boolean }[] = [];
  /** True while the indentation the repl typed for the next line (if any) is on screen for it. */
  #indentShown = true;
  /**
   * A cell's input() / getpass() / readline() waiting: the next line typed (or piped, or already typed ahead)
   * answers it, a password without echo; end of input is EOFError in Python and an empty line in R.
   */
  #pendingInput: { answer: (line: string | undefined) => void } | undefined;
  #muted = false;
  /** The kill of the running cell's kernel a second Ctrl-C started, if any. */
  #killing: Promise<boolean> | undefined;
  /** The kill is said as it happens; the restart after the cell's own outcome, in the order things happened. */
  #restartedDuringCell = false;
  #closed = false;
  #draining: Promise<void> | undefined;

  constructor(options: StackOptions, io: CliIo, stack: Stack, spinner: Spinner) {
    this.#options = options;
    this.#io = io;
    this.#stack = stack;
    this.#spinner = spinner;
    this.#terminal = io.stdin.isTTY === true && io.stdout.isTTY === true;
    this.#language = options.language;
    this.#maxSourceBytes = options.maxSourceBytes ?? DEFAULT_MAX_SOURCE_BYTES;
    this.#input = markInvalidUtf8(io.stdin);
    this.#rl = createInterface({
      input: this.#input.stream,
      output: io.stdout as NodeJS.WritableStream,
      terminal: this.#terminal,
      prompt: PROMPT[this.#language],
      historySize: 1000,
    });
    // A password is typed without echo: readline's output is muted meanwhile.
    const output = this.#rl as unknown as { _writeToOutput?: (text: string) => void };
    const writeToOutput = output._writeToOutput?.bind(this.#rl);
    if (this.#terminal && writeToOutput) {
      output._writeToOutput = (text: string) => {
        if (!this.#muted) writeToOutput(text);
      };
    }
  }

  /** Runs the session until end of input or `:quit`, then shuts the stack down; resolves with the exit code. */
  async run(): Promise<number> {
    const io = this.#io;
    const stack = this.#stack;
    const stopWatching = stack.watchdog.on('*', (event) => {
      if (event.type === 'kill') this.#say('kernelwarden: the cell did not stop; killing the kernel…');
      if (event.type === 'restart' && event.acted) this.#restartedDuringCell = true;
    });
    const done = new Promise<void>((resolveDone) => {
      this.#rl.on('close', () => {
        this.#closed = true;
        this.#answerInput(undefined);
        resolveDone();
      });
    });
    this.#rl.on('line', (line) => {
      if (this.#answerInput(line)) return;
      this.#queue.push({ text: line, sawIndent: this.#indentShown });
      this.#indentShown = false;
      void this.#drain();
    });
    this.#rl.on('SIGINT', this.#onInterrupt);
    // Without a terminal, readline does not see Ctrl-C: the process gets SIGINT.
    if (!this.#terminal) process.on('SIGINT', this.#onInterrupt);
    this.#say(
      `kernelwarden repl — ${this.#language === 'r' ? 'R' : 'Python'} on ${stack.gateway.embedded ? 'the embedded gateway' : stack.gateway.baseUrl}${
        stack.python ? `; Python is ${stack.python.path} (${stack.python.source})` : ''
      }. :help for commands, Ctrl-D to leave.`,
    );
    this.#prompt();
    await done;
    // Ctrl-D while a cell runs: let it finish (or be stopped by the timeout) before shutting down.
    await this.#draining;
    if (this.#terminal) io.stdout.write('\n');
    process.off('SIGINT', this.#onInterrupt);
    this.#input.detach();
    stopWatching();
    await stack.close();
    return ExitCode.ok;
  }

  #say(text: string): void {
    this.#io.stderr.write(`${terminalSafe(text, { colors: false })}\n`);
  }

  /** Answers the cell's pending input request with `line` (undefined: end of input); false when none waits. */
  #answerInput(line: string | undefined): boolean {
    const pending = this.#pendingInput;
    if (!pending) return false;
    this.#pendingInput = undefined;
    if (this.#muted) {
      this.#muted = false;
      this.#io.stdout.write('\n');
    }
    pending.answer(line);
    return true;
  }

  /** The input handler of a cell in `cellLanguage`. */
  #onInput(cellLanguage: Language) {
    return async (request: InputRequest): Promise<string> => {
      await new Promise((resolveSettle) => setTimeout(resolveSettle, PROMPT_SETTLE_MS));
      const text = terminalSafe(request.prompt, { colors: this.#terminal });
      // Piped input: the prompt is printed as python prints it, then the next line answers.
      if (!this.#terminal && text !== '') this.#io.stdout.write(text);
      const typedAhead = this.#queue.shift();
      if (typedAhead !== undefined) return typedAhead.text;
      if (this.#closed) return endOfInput(cellLanguage);
      return new Promise<string>((resolveInput) => {
        this.#pendingInput = { answer: (line) => resolveInput(line ?? endOfInput(cellLanguage)) };
        if (this.#terminal) {
          this.#rl.setPrompt(text);
          this.#rl.prompt();
          this.#muted = request.password;
        }
      });
    };
  }

  #prompt(): void {
    // Piped input gets no prompts, like python's own REPL: only the cells' output.
    if (!this.#terminal) return;
    this.#rl.setPrompt(this.#buffer.length > 0 ? CONTINUATION : PROMPT[this.#language]);
    this.#rl.prompt();
    // Inside a Python block the next line starts indented, as typed by hand (it can be erased).
    if (this.#buffer.length > 0) this.#rl.write(this.#expectedIndent());
    this.#indentShown = true;
  }

  async #runCell(code: string): Promise<void> {
    const controller = new AbortController();
    this.#running = controller;
    this.#restartedDuringCell = false;
    this.#killing = undefined;
    const cellId = `kw-${randomUUID().slice(0, 8)}`;
    const options = this.#options;
    const printer = new OutputPrinter({
      stdout: this.#io.stdout,
      stderr: this.#io.stderr,
      outputsDir: options.outputsDir === undefined ? undefined : resolve(this.#io.cwd, options.outputsDir),
      filePrefix: cellId,
      color: this.#terminal,
      maxImages: options.maxImages,
      maxImageBytes: options.maxImagesBytes,
    });
    try {
      const result = await this.#stack.execute(code, {
        language: this.#language,
        cellId,
        onOutput: printer.onOutput,
        onInput: this.#onInput(this.#language),
        signal: controller.signal,
      });
      printer.finish(result);
      if (this.#killing) this.#say('kernelwarden: the cell was stopped');
      else if (result.timedOut)
        this.#say('kernelwarden: the cell ran past --timeout and was interrupted (the kernel kept its state)');
      else if (result.cancelled) this.#say('kernelwarden: the cell was stopped');
    } catch (error) {
      this.#spinner.stop();
      if (this.#killing || controller.signal.aborted) this.#say('kernelwarden: the cell was stopped');
      else this.#say(`kernelwarden: ${describeFailure(error).message}`);
    } finally {
      this.#running = undefined;
      // An input the cell no longer waits for (it was interrupted): the next line is a cell again.
      this.#answerInput('');
    }
    await this.#sayRestart();
  }

  /** After a cell: whether its kernel was restarted (by a second Ctrl-C, or by the watchdog). */
  async #sayRestart(): Promise<void> {
    if (this.#killing) {
      const restarted = await this.#killing;
      this.#killing = undefined;
      this.#say(
        restarted
          ? 'kernelwarden: the kernel was restarted; earlier variables are gone'
          : 'kernelwarden: the kernel could not be killed; it starts afresh with the next cell if it is gone',
      );
    } else if (this.#restartedDuringCell) {
      this.#say('kernelwarden: the kernel was restarted; earlier variables are gone');
    }
  }

  /** Handles a `:command` line; false when `line` is not one. */
  #meta(line: string): boolean {
    const command = line.trim();
    if (!command.startsWith(':')) return false;
    switch (command) {
      case ':r':
      case ':R':
        this.#language = 'r';
        this.#say('kernelwarden: now running R (:py to go back)');
        return true;
      case ':py':
      case ':python':
        this.#language = 'python';
        this.#say('kernelwarden: now running Python (:r for R)');
        return true;
      case ':help':
      case ':h':
        this.#say(REPL_HELP);
        return true;
      case ':quit':
      case ':q':
      case ':exit':
        this.#rl.close();
        return true;
      default:
        this.#say(`kernelwarden: unknown command ${command} (:help lists them)`);
        return true;
    }
  }

  /** The indentation of the next line of a Python block, typed by the repl on a terminal. */
  #expectedIndent(): string {
    return this.#terminal ? (this.#dedentTo ?? nextIndent(this.#buffer, this.#language)) : '';
  }

  async #handleLine(entry: { text: string; sawIndent: boolean }): Promise<void> {
    let line = entry.text;
    // A line typed before the repl could type its indentation (typed ahead, pasted) gets it now, unless it brings
    // its own.
    if (!entry.sawIndent && this.#buffer.length > 0 && !/^\s/.test(line)) line = this.#expectedIndent() + line;
    this.#dedentTo = undefined;
    if (this.#buffer.length === 0 && this.#meta(line)) return;
    if (this.#buffer.length === 0 && line.trim() === '') return;
    // On a terminal, an empty line inside a nested Python block goes back one level; at the first level it runs the
    // block.
    if (this.#terminal && this.#language === 'python' && this.#buffer.length > 0 && line.trim() === '') {
      const width = line.replaceAll('\t', INDENT).length;
      if (width > INDENT.length) {
        this.#dedentTo = ' '.repeat(width - INDENT.length);
        return;
      }
    }
    const state =
      this.#buffer.length > 0 && line.trim() === ''
        ? 'complete'
        : inputState([...this.#buffer, line].join('\n'), this.#language);
    this.#buffer.push(line);
    if (state !== 'complete') return;
    const code = this.#buffer.join('\n');
    this.#buffer = [];
    if (this.#refused(code)) return;
    await this.#runCell(code);
  }

  /** Says why `code` cannot be sent (not UTF-8, a NUL, too big) and returns true; false when it can. */
  #refused(code: string): boolean {
    try {
      if (hasInvalidBytes(code)) {
        throw new InvalidSourceError(
          'the repl input is not valid UTF-8: the cell was not run (is the terminal set to UTF-8?)',
          { source: 'the repl input', problem: 'encoding' },
        );
      }
      checkSourceText(code, 'the repl input', this.#maxSourceBytes);
      return false;
    } catch (error) {
      this.#say(`kernelwarden: ${describeFailure(error).message}`);
      return true;
    }
  }

  #drain(): Promise<void> {
    this.#draining ??= (async () => {
      try {
        while (this.#queue.length > 0) await this.#handleLine(this.#queue.shift()!);
      } finally {
        this.#draining = undefined;
      }
      if (!this.#closed) this.#prompt();
    })();
    return this.#draining;
  }

  readonly #onInterrupt = (): void => {
    const controller = this.#running;
    if (!controller) {
      this.#buffer = [];
      this.#queue.length = 0;
      this.#io.stdout.write('^C\n');
      this.#say('(Ctrl-D or :quit to leave)');
      this.#prompt();
      return;
    }
    const now = performance.now();
    if (now - this.#lastInterruptAt <= DOUBLE_INTERRUPT_MS) {
      if (!this.#killing) {
        this.#say('\nkernelwarden: killing the kernel…');
        this.#killing = this.#stack.kill(this.#language);
      }
    } else {
      this.#say('\nkernelwarden: interrupting (Ctrl-C again within 2 s to kill and restart the kernel)');
      void this.#stack.interrupt(this.#language);
    }
    this.#lastInterruptAt = now;
  };
}
