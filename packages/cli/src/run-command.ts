import { randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { ExecuteResult } from '@kernelwarden/core';
import { stripAnsi } from '@kernelwarden/core';
import type { NotebookSource, RunSource, StackOptions } from './args.js';
import type { CliIo } from './cli-io.js';
import { createStack, type Stack } from './compose.js';
import { ExitCode } from './exit-code.js';
import { describeFailure, type Failure, resultExitCode } from './failure.js';
import { OutputPrinter } from './output-printer.js';
import { formatRunReport, type RunReport } from './run-report.js';
import { type ScriptBootstrap, scriptBootstrap } from './script-bootstrap.js';
import {
  checkSourceText,
  DEFAULT_MAX_SOURCE_BYTES,
  InvalidSourceError,
  readSourceFile,
  readSourceStream,
} from './source-input.js';
import { Spinner } from './spinner.js';
import { StdinInput } from './stdin-input.js';
import { UsageError } from './usage-error.js';

/** What `run` executes as one cell (a notebook goes to `notebookCommand`). */
type ScriptSource = Exclude<RunSource, NotebookSource>;

/** Reads the cell's code with the source checks (UTF-8, no NUL, at most `maxBytes`): see `source-input.ts`. */
async function readSource(source: ScriptSource, io: CliIo, maxBytes: number): Promise<string> {
  if (source.kind === 'code') return checkSourceText(source.code, '-c CODE', maxBytes);
  if (source.kind === 'stdin') return readSourceStream(io.stdin, 'standard input', maxBytes);
  try {
    return await readSourceFile(resolve(io.cwd, source.path), source.path, maxBytes);
  } catch (error) {
    if (InvalidSourceError.isInstance(error)) throw error;
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message;
    throw new UsageError(`cannot read ${source.path}: ${reason}`, { command: 'run', cause: error });
  }
}

function checkDirectory(flag: string, dir: string): void {
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    // reported below
  }
  if (!isDir) throw new UsageError(`${flag} ${dir} is not a directory`, { command: 'run' });
}

/**
 * `kernelwarden run`: runs one cell on a fresh stack, streams or collects its output, shuts everything down, and
 * resolves with the exit code.
 */
export function runCommand(source: ScriptSource, options: StackOptions, io: CliIo): Promise<number> {
  return new ScriptRun(options, io).run(source);
}

/** One `kernelwarden run` of a script: its cell, its signals, its printer and its report. */
class ScriptRun {
  readonly #options: StackOptions;
  readonly #io: CliIo;
  readonly #started = performance.now();
  readonly #cellId = `kw-${randomUUID().slice(0, 8)}`;
  readonly #spinner: Spinner;
  readonly #cell = new AbortController();
  readonly #printer: OutputPrinter;
  #stack: Stack | undefined;
  #input: StdinInput | undefined;
  #interrupts = 0;
  #stdoutClosed = false;
  #isExit: (error: { ename: string; evalue: string }) => boolean = () => false;

  constructor(options: StackOptions, io: CliIo) {
    this.#options = options;
    this.#io = io;
    this.#spinner = new Spinner(io.stderr, { enabled: !options.json });
    this.#printer = new OutputPrinter({
      stdout: io.stdout,
      stderr: io.stderr,
      outputsDir: options.outputsDir === undefined ? undefined : resolve(io.cwd, options.outputsDir),
      quiet: options.json,
      filePrefix: this.#cellId,
      isExit: (error) => this.#isExit(error),
      maxImages: options.maxImages,
      maxImageBytes: options.maxImagesBytes,
    });
  }

  /** Runs `source` and shuts everything down; resolves with the exit code (never rejects). */
  async run(source: ScriptSource): Promise<number> {
    process.on('SIGINT', this.#onSignal);
    process.on('SIGTERM', this.#onSignal);
    // Kept until the process ends: writes after the close fail too, and must not surface as uncaught errors.
    (this.#io.stdout as Partial<NodeJS.EventEmitter>).on?.('error', this.#onStdoutError);
    try {
      return await this.#runScript(source);
    } catch (error) {
      this.#spinner.stop();
      if (this.#cell.signal.aborted) return this.#interrupted();
      return this.#fail(describeFailure(error));
    } finally {
      this.#spinner.stop();
      this.#input?.close();
      await this.#stack?.close();
      process.off('SIGINT', this.#onSignal);
      process.off('SIGTERM', this.#onSignal);
    }
  }

  readonly #onSignal = (): void => {
    this.#interrupts++;
    if (this.#interrupts === 1) {
      if (!this.#options.json)
        this.#io.stderr.write('\nkernelwarden: interrupted; stopping the kernel (Ctrl-C again to quit at once)\n');
      this.#cell.abort(new Error('interrupted by the user'));
    } else {
      process.exit(ExitCode.interrupted);
    }
  };

  /**
   * A reader that stops reading (`| head`) closes the pipe: the cell is stopped, the kernel released, and the
   * command ends quietly with 141, as a program killed by SIGPIPE does.
   */
  readonly #onStdoutError = (error: NodeJS.ErrnoException): void => {
    if (this.#stdoutClosed) return;
    this.#stdoutClosed = true;
    this.#cell.abort(new Error(`standard output was closed (${error.code ?? error.message})`));
  };

  async #runScript(source: ScriptSource): Promise<number> {
    const options = this.#options;
    const io = this.#io;
    const code = await readSource(source, io, options.maxSourceBytes ?? DEFAULT_MAX_SOURCE_BYTES);
    const script = scriptBootstrap(
      options.language,
      source.kind === 'file' ? { kind: 'file', path: resolve(io.cwd, source.path) } : { kind: source.kind },
      code,
    );
    this.#isExit = script.isExit;
    const input = new StdinInput({
      stdin: io.stdin,
      // The --json document owns stdout: prompts go to stderr there.
      stdout: options.json ? io.stderr : io.stdout,
      stderr: io.stderr,
      onInterrupt: this.#onSignal,
      consumed: source.kind === 'stdin',
    });
    this.#input = input;
    checkDirectory('--cwd', options.cwd);
    this.#spinner.start(
      options.gatewayUrl ? `connecting to ${options.gatewayUrl}…` : 'connecting to the embedded Jupyter gateway…',
    );
    this.#stack = await createStack(options, {
      env: io.env,
      onNotice: (message) => io.stderr.write(`kernelwarden: ${message}\n`),
      signal: this.#cell.signal,
      bootstrap: { [options.language]: script.code },
      // The script's cell follows the kernel's cwd/env step without waiting a round trip for it.
      environmentStep: 'ahead',
      onKernelStarting: (language) => this.#spinner.start(`starting the ${language === 'r' ? 'R' : 'Python'} kernel…`),
      onKernelStarted: () => this.#spinner.stop(),
    });
    this.#spinner.stop();
    const result = await this.#execute(this.#stack, code, input);
    if (typeof result === 'number') return result;
    return this.#finish(result, script);
  }

  /** Runs the cell; a failure of the run itself (not the cell's own error) is reported and its exit code returned. */
  async #execute(stack: Stack, code: string, input: StdinInput): Promise<ExecuteResult | number> {
    try {
      return await stack.execute(code, {
        language: this.#options.language,
        cellId: this.#cellId,
        // Once the reader is gone, what the stopped cell still sends (its KeyboardInterrupt too) is dropped.
        onOutput: (output) => {
          if (!this.#stdoutClosed) this.#printer.onOutput(output);
        },
        onInput: (request) => input.answer(request, this.#options.language),
        signal: this.#cell.signal,
      });
    } catch (error) {
      this.#spinner.stop();
      if (this.#cell.signal.aborted) return this.#interrupted();
      const failure = describeFailure(error);
      return this.#fail(failure, failure.exitCode === ExitCode.timedOut ? 'timeout' : 'failed');
    }
  }

  /** The cell's outcome: printed (or reported with --json), with the exit status it asked for or its own. */
  #finish(result: ExecuteResult, script: ScriptBootstrap): number {
    if (this.#stdoutClosed) return ExitCode.stdoutClosed;
    this.#printer.finish(result);
    const exitCode = script.exitStatus(result) ?? resultExitCode(result, this.#cell.signal.aborted);
    if (exitCode === ExitCode.timedOut && !this.#options.json) {
      this.#io.stderr.write(
        'kernelwarden: the cell ran past --timeout and was interrupted; the kernel kept its state (it was not reset)\n',
      );
    }
    return this.#report({
      exitCode,
      status: result.status,
      cellId: result.cellId,
      ...(result.executionCount === undefined ? {} : { executionCount: result.executionCount }),
      stdout: result.stdout,
      stderr: result.stderr,
      ...(result.error ? { error: { ...result.error, traceback: result.error.traceback.map(stripAnsi) } } : {}),
      // The traceback is in `error`, once, as plain text: its `error` output would repeat it with colours.
      outputs: result.error ? result.outputs.filter((output) => output.type !== 'error') : result.outputs,
      timedOut: result.timedOut,
      cancelled: result.cancelled,
      truncated: result.truncated,
      outputDropped: result.outputDropped === true,
    });
  }

  /** Writes the --json document (nothing without --json) and returns its exit code. */
  #report(fields: Partial<RunReport> & Pick<RunReport, 'exitCode' | 'status'>): number {
    if (this.#stdoutClosed) return ExitCode.stdoutClosed;
    if (this.#options.json) {
      const printer = this.#printer;
      const doc: RunReport = {
        language: this.#options.language,
        cellId: this.#cellId,
        stdout: '',
        stderr: '',
        outputs: [],
        files: [...printer.saved],
        imagesNotSaved:
          printer.unsaved.noOutputsDir + printer.unsaved.overCount + printer.unsaved.overSize + printer.unsaved.refused,
        timedOut: false,
        cancelled: false,
        kernelReset: false,
        truncated: false,
        outputDropped: false,
        elided: false,
        notes: printer.notes(),
        durationMs: Math.round(performance.now() - this.#started),
        ...fields,
      };
      this.#io.stdout.write(`${formatRunReport(doc)}\n`);
    }
    return fields.exitCode;
  }

  #fail(failure: Failure, status: 'failed' | 'timeout' = 'failed'): number {
    if (this.#stdoutClosed) return ExitCode.stdoutClosed;
    this.#io.stderr.write(`kernelwarden: ${failure.message}\n`);
    return this.#report({
      exitCode: failure.exitCode,
      status,
      error: { code: failure.code, message: failure.message },
      timedOut: status === 'timeout',
      kernelReset: status === 'timeout',
    });
  }

  #interrupted(): number {
    return this.#fail({ exitCode: ExitCode.interrupted, code: undefined, message: 'interrupted' });
  }
}
