import { resolve } from 'node:path';
import { type ExecuteResult, emptyResult, KernelwardenError } from '@kernelwarden/core';
import type { CellReport, Notebook } from '@kernelwarden/notebook';
import { cellTimeoutFromEnv } from '@kernelwarden/watchdog';
import type { Language, NotebookSource, StackOptions } from './args.js';
import type { CliIo } from './cli-io.js';
import { createStack, type Stack } from './compose.js';
import { ExitCode } from './exit-code.js';
import { describeFailure, type Failure } from './failure.js';
import { notebookModule } from './notebook-module.js';
import { OutputPrinter } from './output-printer.js';
import { Spinner } from './spinner.js';
import { terminalSafe } from './terminal-text.js';
import { UsageError } from './usage-error.js';

/** The watchdog's default budget of a cell, when neither --timeout nor KERNELWARDEN_CELL_TIMEOUT says. */
const DEFAULT_CELL_TIMEOUT_MS = 900_000;

type NotebookModule = typeof import('@kernelwarden/notebook');

/** A notebook read and checked: its language, and its parameters' values as papermill reads them. */
interface LoadedNotebook {
  notebook: Notebook;
  language: Language;
  parameters: [string, unknown][];
}

/** Reads the notebook and its parameters; a notebook it cannot run is a `Failure`. */
async function loadNotebook(nbm: NotebookModule, source: NotebookSource, io: CliIo): Promise<LoadedNotebook | Failure> {
  try {
    const notebook = await nbm.readNotebook(resolve(io.cwd, source.path));
    const named = source.lang ?? nbm.notebookLanguage(notebook);
    if (named !== 'python' && named !== 'r') {
      throw new UsageError(
        `${source.path} is a ${named} notebook: kernelwarden runs Python and R (pass --lang python or --lang r to run it as one)`,
        { command: 'run' },
      );
    }
    const parameters = source.parameters.map(([name, value]): [string, unknown] => [
      name,
      nbm.parseParameterValue(value),
    ]);
    return { notebook, language: named, parameters };
  } catch (error) {
    return notebookFailure(error, source.path);
  }
}

/** Ctrl-C (or SIGTERM) aborts `run`; a second one quits at once. Returns what stops listening. */
function abortOnSignal(io: CliIo, run: AbortController): () => void {
  let interrupts = 0;
  const onSignal = () => {
    interrupts++;
    if (interrupts === 1) {
      io.stderr.write('\nkernelwarden: interrupted; stopping the kernel (Ctrl-C again to quit at once)\n');
      run.abort(new Error('interrupted by the user'));
    } else {
      process.exit(ExitCode.interrupted);
    }
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
}

/**
 * `kernelwarden run NOTEBOOK.ipynb`: runs the notebook's code cells in order in one kernel of its language (its
 * kernelspec or `language_info`, else `--lang`), streams each cell's output as a script's, writes the executed
 * notebook to `--output` (or over the input with `--inplace`) — also when a cell stopped the run — and resolves
 * with the exit code a script would have: 1 for the first cell that raised (named, with its index), 124 for one that
 * ran past --timeout, 5 when the kernel died, 130 when interrupted.
 */
export async function notebookCommand(source: NotebookSource, options: StackOptions, io: CliIo): Promise<number> {
  const nbm = notebookModule();
  const fail = (failure: Failure): number => {
    io.stderr.write(`kernelwarden: ${failure.message}\n`);
    return failure.exitCode;
  };
  const loaded = await loadNotebook(nbm, source, io);
  if ('exitCode' in loaded) return fail(loaded);

  const spinner = new Spinner(io.stderr);
  const run = new AbortController();
  const stopListening = abortOnSignal(io, run);
  // One printer for the run: images go to --outputs-dir as a script's, its caps count over the whole notebook.
  const printer = new OutputPrinter({
    stdout: io.stdout,
    stderr: io.stderr,
    outputsDir: options.outputsDir === undefined ? undefined : resolve(io.cwd, options.outputsDir),
    filePrefix: 'cell',
    maxImages: options.maxImages,
    maxImageBytes: options.maxImagesBytes,
  });
  const tap = nbm.createMessageTap();
  let stack: Stack | undefined;
  try {
    spinner.start(
      options.gatewayUrl ? `connecting to ${options.gatewayUrl}…` : 'connecting to the embedded Jupyter gateway…',
    );
    // The watchdog's own budget is off: runNotebook bounds each cell from the moment its request is sent (a
    // kernel's start is not counted) and stops it through the same ladder (interrupt, then kill and restart).
    stack = await createStack(
      { ...options, language: loaded.language, timeoutMs: 0 },
      {
        env: io.env,
        signal: run.signal,
        wrapWebSocket: (base) => tap.wrap(base),
        onKernelStarting: (lang) => spinner.start(`starting the ${lang === 'r' ? 'R' : 'Python'} kernel…`),
        onKernelStarted: () => spinner.stop(),
      },
    );
    spinner.stop();
    return await executeNotebook(nbm, loaded, { source, options, io, stack, tap, printer, signal: run.signal });
  } catch (error) {
    spinner.stop();
    if (run.signal.aborted) return fail({ exitCode: ExitCode.interrupted, code: undefined, message: 'interrupted' });
    return fail(describeFailure(error));
  } finally {
    spinner.stop();
    await stack?.close();
    stopListening();
  }
}

/**
 * Runs the loaded notebook on the stack's session, each cell's output through `printer` (a line per cell on a
 * terminal), and says how it ended: the cells that raised under --allow-errors, where the notebook was written, or
 * what stopped the run and how far the written notebook got.
 */
async function executeNotebook(
  nbm: NotebookModule,
  loaded: LoadedNotebook,
  ctx: {
    source: NotebookSource;
    options: StackOptions;
    io: CliIo;
    stack: Stack;
    tap: ReturnType<NotebookModule['createMessageTap']>;
    printer: OutputPrinter;
    signal: AbortSignal;
  },
): Promise<number> {
  const { source, options, io, printer, signal } = ctx;
  const { language, parameters } = loaded;
  const say = (line: string) => io.stderr.write(`kernelwarden: ${line}\n`);
  const shown = (text: string | undefined) => terminalSafe(text ?? '', { colors: false });
  const outputPath = source.output === undefined ? undefined : resolve(io.cwd, source.output);
  const progress = io.stderr.isTTY === true;
  const cellTimeoutMs = options.timeoutMs ?? cellTimeoutFromEnv(io.env) ?? DEFAULT_CELL_TIMEOUT_MS;
  let last: ExecuteResult | undefined;
  try {
    const result = await nbm.runNotebook(loaded.notebook, {
      session: ctx.stack.session,
      tap: ctx.tap,
      language,
      ...(parameters.length > 0
        ? {
            parameters: parameters as never,
            parameterLanguage: language === 'r' ? ('R' as const) : ('python' as const),
          }
        : {}),
      allowErrors: source.allowErrors,
      cellTimeoutMs,
      ...(options.interruptGraceMs === undefined ? {} : { interruptGraceMs: options.interruptGraceMs }),
      ...(options.killGraceMs === undefined ? {} : { killGraceMs: options.killGraceMs }),
      ...(outputPath === undefined ? {} : { outputPath }),
      signal,
      origin: 'cli',
      onOutput: ({ output }) => printer.onOutput(output),
      onCell: (report) => {
        if (report.result) last = report.result;
        if (progress && report.status !== 'skipped') say(cellLine(report));
      },
    });
    printer.finish(last ?? emptyResult('cell'));
    const raised = result.cells.filter((c) => c.status === 'error');
    if (raised.length > 0) {
      say(
        `${raised.length} cell${raised.length === 1 ? '' : 's'} raised (--allow-errors): ${raised.map((c) => c.index).join(', ')}`,
      );
    }
    if (outputPath !== undefined) say(`wrote ${shown(source.output)}`);
    return ExitCode.ok;
  } catch (error) {
    printer.finish(last ?? emptyResult('cell'));
    if (signal.aborted) {
      say(
        outputPath === undefined
          ? 'interrupted'
          : `interrupted; wrote the notebook as far as it ran to ${shown(source.output)}`,
      );
      return ExitCode.interrupted;
    }
    const failure = notebookFailure(error, source.path);
    say(failure.message);
    if (outputPath !== undefined && nbm.NotebookError.isInstance(error) && (error as { result?: unknown }).result) {
      say(`wrote the notebook as far as it ran to ${shown(source.output)}`);
    }
    return failure.exitCode;
  }
}

/** `cell 3 ok (0.4s)` */
function cellLine(report: CellReport): string {
  const took = report.durationMs === undefined ? '' : ` (${(report.durationMs / 1000).toFixed(1)}s)`;
  return `cell ${report.index} ${report.status}${took}`;
}

/** How a notebook's error ends the command: its exit code and message. */
function notebookFailure(error: unknown, path: string): Failure {
  const code = KernelwardenError.isInstance(error) ? error.code : undefined;
  const message = terminalSafe(error instanceof Error ? error.message : String(error), { colors: false });
  switch (code) {
    case 'NOTEBOOK_CELL_ERROR':
      return { exitCode: ExitCode.cellError, code, message };
    case 'NOTEBOOK_CELL_TIMEOUT':
      return {
        exitCode: ExitCode.timedOut,
        code,
        message: `${message} (--timeout)`,
      };
    case 'NOTEBOOK_INVALID':
      return {
        exitCode: ExitCode.usage,
        code,
        message: `${terminalSafe(path, { colors: false })} is not a notebook kernelwarden can run: ${message}`,
      };
    case 'NOTEBOOK_IO':
    case 'NOTEBOOK_PARAMETERS':
      return { exitCode: ExitCode.usage, code, message };
    case 'NOTEBOOK_KERNEL': {
      const cause = (error as { cause?: unknown }).cause;
      const inner = cause === undefined ? undefined : describeFailure(cause);
      return inner && inner.exitCode !== ExitCode.internal
        ? { ...inner, message: `${message}` }
        : { exitCode: ExitCode.internal, code, message };
    }
    default:
      return describeFailure(error);
  }
}
