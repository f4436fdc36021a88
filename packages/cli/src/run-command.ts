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
import { scriptBootstrap } from './script-bootstrap.js';
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
export async function runCommand(source: ScriptSource, options: StackOptions, io: CliIo): Promise<number> {
  const started = performance.now();
  const cellId = `kw-${randomUUID().slice(0, 8)}`;
  const spinner = new Spinner(io.stderr, { enabled: !options.json });
  const cell = new AbortController();
  let stack: Stack | undefined;
  let interrupts = 0;
  const onSignal = () => {
    interrupts++;
    if (interrupts === 1) {
      if (!options.json)
        io.stderr.write('\nkernelwarden: interrupted; stopping the kernel (Ctrl-C again to quit at once)\n');
      cell.abort(new Error('interrupted by the user'));
    } else {
      process.exit(ExitCode.interrupted);
    }
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // A reader that stops reading (`| head`) closes the pipe: the cell is stopped, the kernel released, and the
  // command ends quietly with 141, as a program killed by SIGPIPE does.
  let stdoutClosed = false;
  const onStdoutError = (error: NodeJS.ErrnoException) => {
    if (stdoutClosed) return;
    stdoutClosed = true;
    cell.abort(new Error(`standard output was closed (${error.code ?? error.message})`));
  };
  const stdoutEvents = io.stdout as Partial<NodeJS.EventEmitter>;
  // Kept until the process ends: writes after the close fail too, and must not surface as uncaught errors.
  stdoutEvents.on?.('error', onStdoutError);
  let input: StdinInput | undefined;
  let isExit: (error: { ename: string; evalue: string }) => boolean = () => false;
  const printer = new OutputPrinter({
    stdout: io.stdout,
    stderr: io.stderr,
    outputsDir: options.outputsDir === undefined ? undefined : resolve(io.cwd, options.outputsDir),
    quiet: options.json,
    filePrefix: cellId,
    isExit: (error) => isExit(error),
    maxImages: options.maxImages,
    maxImageBytes: options.maxImagesBytes,
  });
  const report = (fields: Partial<RunReport> & Pick<RunReport, 'exitCode' | 'status'>): number => {
    if (stdoutClosed) return ExitCode.stdoutClosed;
    if (options.json) {
      const doc: RunReport = {
        language: options.language,
        cellId,
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
        durationMs: Math.round(performance.now() - started),
        ...fields,
      };
      io.stdout.write(`${formatRunReport(doc)}\n`);
    }
    return fields.exitCode;
  };
  const fail = (failure: Failure, status: 'failed' | 'timeout' = 'failed'): number => {
    if (stdoutClosed) return ExitCode.stdoutClosed;
    io.stderr.write(`kernelwarden: ${failure.message}\n`);
    return report({
      exitCode: failure.exitCode,
      status,
      error: { code: failure.code, message: failure.message },
      timedOut: status === 'timeout',
      kernelReset: status === 'timeout',
    });
  };

  try {
    const code = await readSource(source, io, options.maxSourceBytes ?? DEFAULT_MAX_SOURCE_BYTES);
    const script = scriptBootstrap(
      options.language,
      source.kind === 'file' ? { kind: 'file', path: resolve(io.cwd, source.path) } : { kind: source.kind },
      code,
    );
    isExit = script.isExit;
    input = new StdinInput({
      stdin: io.stdin,
      // The --json document owns stdout: prompts go to stderr there.
      stdout: options.json ? io.stderr : io.stdout,
      stderr: io.stderr,
      onInterrupt: onSignal,
      consumed: source.kind === 'stdin',
    });
    const stdinInput = input;
    checkDirectory('--cwd', options.cwd);
    spinner.start(
      options.gatewayUrl ? `connecting to ${options.gatewayUrl}…` : 'connecting to the embedded Jupyter gateway…',
    );
    stack = await createStack(options, {
      env: io.env,
      onNotice: (message) => io.stderr.write(`kernelwarden: ${message}\n`),
      signal: cell.signal,
      bootstrap: { [options.language]: script.code },
      onKernelStarting: (language) => spinner.start(`starting the ${language === 'r' ? 'R' : 'Python'} kernel…`),
      onKernelStarted: () => spinner.stop(),
    });
    spinner.stop();
    let result: ExecuteResult;
    try {
      result = await stack.execute(code, {
        language: options.language,
        cellId,
        // Once the reader is gone, what the stopped cell still sends (its KeyboardInterrupt too) is dropped.
        onOutput: (output) => {
          if (!stdoutClosed) printer.onOutput(output);
        },
        onInput: (request) => stdinInput.answer(request, options.language),
        signal: cell.signal,
      });
    } catch (error) {
      spinner.stop();
      if (cell.signal.aborted) return fail({ exitCode: ExitCode.interrupted, code: undefined, message: 'interrupted' });
      const failure = describeFailure(error);
      return fail(failure, failure.exitCode === ExitCode.timedOut ? 'timeout' : 'failed');
    }
    if (stdoutClosed) return ExitCode.stdoutClosed;
    printer.finish(result);
    const exitCode = script.exitStatus(result) ?? resultExitCode(result, cell.signal.aborted);
    if (exitCode === ExitCode.timedOut && !options.json) {
      io.stderr.write(
        'kernelwarden: the cell ran past --timeout and was interrupted; the kernel kept its state (it was not reset)\n',
      );
    }
    return report({
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
  } catch (error) {
    spinner.stop();
    if (cell.signal.aborted) return fail({ exitCode: ExitCode.interrupted, code: undefined, message: 'interrupted' });
    return fail(describeFailure(error));
  } finally {
    spinner.stop();
    input?.close();
    await stack?.close();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
