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

/**
 * `kernelwarden repl`: a line-editing prompt on the stack. Python and R each keep their own kernel for the whole
 * session; Ctrl-C interrupts, a second Ctrl-C within 2 s aborts the cell so the watchdog kills and restarts it.
 */
export async function replCommand(options: StackOptions, io: CliIo): Promise<number> {
  const terminal = io.stdin.isTTY === true && io.stdout.isTTY === true;
  const spinner = new Spinner(io.stderr);
  const say = (text: string) => io.stderr.write(`${terminalSafe(text, { colors: false })}\n`);
  let stack: Stack;
  try {
    spinner.start(
      options.gatewayUrl ? `connecting to ${options.gatewayUrl}…` : 'connecting to the embedded Jupyter gateway…',
    );
    stack = await createStack(options, {
      env: io.env,
      onNotice: (message) => io.stderr.write(`kernelwarden: ${message}\n`),
      onKernelStarting: (language) => spinner.start(`starting the ${language === 'r' ? 'R' : 'Python'} kernel…`),
      onKernelStarted: () => spinner.stop(),
    });
    spinner.stop();
  } catch (error) {
    spinner.stop();
    const failure = describeFailure(error);
    say(`kernelwarden repl: ${failure.message}`);
    return failure.exitCode;
  }
  // The kill is said as it happens; the restart after the cell's own outcome, in the order things happened.
  let restartedDuringCell = false;
  const stopWatching = stack.watchdog.on('*', (event) => {
    if (event.type === 'kill') say('kernelwarden: the cell did not stop; killing the kernel…');
    if (event.type === 'restart' && event.acted) restartedDuringCell = true;
  });

  let language: Language = options.language;
  /** The indentation of the next block line after an empty line went back a level. */
  let dedentTo: string | undefined;
  let buffer: string[] = [];
  let running: AbortController | undefined;
  let lastInterruptAt = Number.NEGATIVE_INFINITY;
  /** Lines read and not yet handled; `sawIndent`: typed after the repl had typed that line's indentation. */
  const queue: { text: string; sawIndent: boolean }[] = [];
  /** True while the indentation the repl typed for the next line (if any) is on screen for it. */
  let indentShown = true;

  // Bytes that are not UTF-8 are marked (readline would make them U+FFFD silently) and their cell refused.
  const input = markInvalidUtf8(io.stdin);
  const maxSourceBytes = options.maxSourceBytes ?? DEFAULT_MAX_SOURCE_BYTES;
  const rl = createInterface({
    input: input.stream,
    output: io.stdout as NodeJS.WritableStream,
    terminal,
    prompt: PROMPT[language],
    historySize: 1000,
  });
  // A cell's input() / getpass() / readline(): the next line typed (or piped, or already typed ahead), a password
  // without echo; end of input is EOFError in Python and an empty line in R.
  let pendingInput: { answer: (line: string | undefined) => void } | undefined;
  let muted = false;
  const output = rl as unknown as { _writeToOutput?: (text: string) => void };
  const writeToOutput = output._writeToOutput?.bind(rl);
  if (terminal && writeToOutput) {
    output._writeToOutput = (text: string) => {
      if (!muted) writeToOutput(text);
    };
  }
  const answerInput = (line: string | undefined): boolean => {
    const pending = pendingInput;
    if (!pending) return false;
    pendingInput = undefined;
    if (muted) {
      muted = false;
      io.stdout.write('\n');
    }
    pending.answer(line);
    return true;
  };
  const onInput = (cellLanguage: Language) => async (request: InputRequest) => {
    await new Promise((resolveSettle) => setTimeout(resolveSettle, PROMPT_SETTLE_MS));
    const text = terminalSafe(request.prompt, { colors: terminal });
    // Piped input: the prompt is printed as python prints it, then the next line answers.
    if (!terminal && text !== '') io.stdout.write(text);
    const typedAhead = queue.shift();
    if (typedAhead !== undefined) return typedAhead.text;
    if (closed) return endOfInput(cellLanguage);
    return new Promise<string>((resolveInput) => {
      pendingInput = { answer: (line) => resolveInput(line ?? endOfInput(cellLanguage)) };
      if (terminal) {
        rl.setPrompt(text);
        rl.prompt();
        muted = request.password;
      }
    });
  };

  const prompt = () => {
    // Piped input gets no prompts, like python's own REPL: only the cells' output.
    if (!terminal) return;
    rl.setPrompt(buffer.length > 0 ? CONTINUATION : PROMPT[language]);
    rl.prompt();
    // Inside a Python block the next line starts indented, as typed by hand (it can be erased).
    if (buffer.length > 0) rl.write(expectedIndent());
    indentShown = true;
  };

  /** The kill of the running cell's kernel a second Ctrl-C started, if any. */
  let killing: Promise<boolean> | undefined;

  const runCell = async (code: string) => {
    const controller = new AbortController();
    running = controller;
    restartedDuringCell = false;
    killing = undefined;
    const cellId = `kw-${randomUUID().slice(0, 8)}`;
    const printer = new OutputPrinter({
      stdout: io.stdout,
      stderr: io.stderr,
      outputsDir: options.outputsDir === undefined ? undefined : resolve(io.cwd, options.outputsDir),
      filePrefix: cellId,
      color: terminal,
      maxImages: options.maxImages,
      maxImageBytes: options.maxImagesBytes,
    });
    try {
      const result = await stack.execute(code, {
        language,
        cellId,
        onOutput: printer.onOutput,
        onInput: onInput(language),
        signal: controller.signal,
      });
      printer.finish(result);
      if (killing) say('kernelwarden: the cell was stopped');
      else if (result.timedOut)
        say('kernelwarden: the cell ran past --timeout and was interrupted (the kernel kept its state)');
      else if (result.cancelled) say('kernelwarden: the cell was stopped');
    } catch (error) {
      spinner.stop();
      if (killing || controller.signal.aborted) say('kernelwarden: the cell was stopped');
      else say(`kernelwarden: ${describeFailure(error).message}`);
    } finally {
      running = undefined;
      // An input the cell no longer waits for (it was interrupted): the next line is a cell again.
      answerInput('');
    }
    if (killing) {
      const restarted = await killing;
      killing = undefined;
      say(
        restarted
          ? 'kernelwarden: the kernel was restarted; earlier variables are gone'
          : 'kernelwarden: the kernel could not be killed; it starts afresh with the next cell if it is gone',
      );
    } else if (restartedDuringCell) {
      say('kernelwarden: the kernel was restarted; earlier variables are gone');
    }
  };

  const meta = (line: string): boolean => {
    const command = line.trim();
    if (!command.startsWith(':')) return false;
    switch (command) {
      case ':r':
      case ':R':
        language = 'r';
        say('kernelwarden: now running R (:py to go back)');
        return true;
      case ':py':
      case ':python':
        language = 'python';
        say('kernelwarden: now running Python (:r for R)');
        return true;
      case ':help':
      case ':h':
        say(REPL_HELP);
        return true;
      case ':quit':
      case ':q':
      case ':exit':
        rl.close();
        return true;
      default:
        say(`kernelwarden: unknown command ${command} (:help lists them)`);
        return true;
    }
  };

  /** The indentation of the next line of a Python block, typed by the repl on a terminal. */
  const expectedIndent = () => (terminal ? (dedentTo ?? nextIndent(buffer, language)) : '');

  const handleLine = async (entry: { text: string; sawIndent: boolean }) => {
    let line = entry.text;
    // A line typed before the repl could type its indentation (typed ahead, pasted) gets it now, unless it brings
    // its own.
    if (!entry.sawIndent && buffer.length > 0 && !/^\s/.test(line)) line = expectedIndent() + line;
    dedentTo = undefined;
    if (buffer.length === 0 && meta(line)) return;
    if (buffer.length === 0 && line.trim() === '') return;
    // On a terminal, an empty line inside a nested Python block goes back one level; at the first level it runs the
    // block.
    if (terminal && language === 'python' && buffer.length > 0 && line.trim() === '') {
      const width = line.replaceAll('\t', INDENT).length;
      if (width > INDENT.length) {
        dedentTo = ' '.repeat(width - INDENT.length);
        return;
      }
    }
    const state =
      buffer.length > 0 && line.trim() === '' ? 'complete' : inputState([...buffer, line].join('\n'), language);
    buffer.push(line);
    if (state !== 'complete') return;
    const code = buffer.join('\n');
    buffer = [];
    try {
      if (hasInvalidBytes(code)) {
        throw new InvalidSourceError(
          'the repl input is not valid UTF-8: the cell was not run (is the terminal set to UTF-8?)',
          { source: 'the repl input', problem: 'encoding' },
        );
      }
      checkSourceText(code, 'the repl input', maxSourceBytes);
    } catch (error) {
      say(`kernelwarden: ${describeFailure(error).message}`);
      return;
    }
    await runCell(code);
  };

  let draining: Promise<void> | undefined;
  const drain = () =>
    (draining ??= (async () => {
      try {
        while (queue.length > 0) await handleLine(queue.shift()!);
      } finally {
        draining = undefined;
      }
      if (!closed) prompt();
    })());

  const onInterrupt = () => {
    const controller = running;
    if (!controller) {
      buffer = [];
      queue.length = 0;
      io.stdout.write('^C\n');
      say('(Ctrl-D or :quit to leave)');
      prompt();
      return;
    }
    const now = performance.now();
    if (now - lastInterruptAt <= DOUBLE_INTERRUPT_MS) {
      if (!killing) {
        say('\nkernelwarden: killing the kernel…');
        killing = stack.kill(language);
      }
    } else {
      say('\nkernelwarden: interrupting (Ctrl-C again within 2 s to kill and restart the kernel)');
      void stack.interrupt(language);
    }
    lastInterruptAt = now;
  };

  let closed = false;
  const done = new Promise<void>((resolveDone) => {
    rl.on('close', () => {
      closed = true;
      answerInput(undefined);
      resolveDone();
    });
  });
  rl.on('line', (line) => {
    if (answerInput(line)) return;
    queue.push({ text: line, sawIndent: indentShown });
    indentShown = false;
    void drain();
  });
  rl.on('SIGINT', onInterrupt);
  // Without a terminal, readline does not see Ctrl-C: the process gets SIGINT.
  if (!terminal) process.on('SIGINT', onInterrupt);

  say(
    `kernelwarden repl — ${language === 'r' ? 'R' : 'Python'} on ${stack.gateway.embedded ? 'the embedded gateway' : stack.gateway.baseUrl}${
      stack.python ? `; Python is ${stack.python.path} (${stack.python.source})` : ''
    }. :help for commands, Ctrl-D to leave.`,
  );
  prompt();
  await done;
  // Ctrl-D while a cell runs: let it finish (or be stopped by the timeout) before shutting down.
  await draining;
  if (terminal) io.stdout.write('\n');
  process.off('SIGINT', onInterrupt);
  input.detach();
  stopWatching();
  await stack.close();
  return ExitCode.ok;
}
