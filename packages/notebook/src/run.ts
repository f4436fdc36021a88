import { randomUUID } from 'node:crypto';
import { type Clock, type Output, systemClock } from '@kernelwarden/core';
import { type CellExecutor, createCellExecutor, type Outcome } from './cell-executor.js';
import {
  NotebookCellError,
  NotebookCellTimeoutError,
  type NotebookError,
  NotebookKernelError,
  NotebookParameterError,
} from './errors.js';
import { cellTags, loadNotebook, readNotebook, writeNotebook } from './format.js';
import { type CellOutputs, coalesceStreams, NotebookOutputs, TIMING_KEYS } from './outputs.js';
import { injectParameters, type Parameters, parameterLanguage } from './parameters.js';
import { isBlank } from './pyjson.js';
import { parseRunOptions, type RunNotebookOptions } from './run-options.js';
import type { CellReport, CodeCell, JsonObject, Notebook, NotebookCell, NotebookRun } from './types.js';

/** The tag of cells that are not run (their outputs are kept as they are). */
export const SKIP_EXECUTION_TAG = 'skip-execution';
/** The tag of cells whose error does not stop the run. */
export const RAISES_EXCEPTION_TAG = 'raises-exception';

/** The session slot a notebook's cells run in: `'python'`, `'r'`, or the kernel's language as the notebook names it. */
export function notebookLanguage(nb: Notebook): string {
  const kernelspec = (nb.metadata.kernelspec ?? {}) as JsonObject;
  const info = (nb.metadata.language_info ?? {}) as JsonObject;
  for (const c of [kernelspec.language, info.name]) {
    if (typeof c === 'string' && c !== '') return c.toLowerCase();
  }
  if (kernelspec.name === 'ir') return 'r';
  return 'python';
}

/**
 * Runs a notebook's code cells in order on a supervised kernel and returns the executed notebook as nbclient would
 * have written it, with a report per cell.
 *
 * `notebook` is an nbformat v4 notebook (JSON text already parsed, or `Notebook`), or a path to read. Rejects with
 * `NotebookFormatError`/`NotebookIOError` before anything runs; with `NotebookCellError` (a cell raised and errors are
 * not allowed for it), `NotebookCellTimeoutError` or `NotebookKernelError` when a cell stops the run — each carrying
 * `result`, the notebook as far as it got; with the signal's reason when `signal` aborts. Bad options throw
 * `InvalidOptionsError` naming the field (`options.cellTimeoutMs`).
 */
export async function runNotebook(notebook: unknown, options: RunNotebookOptions): Promise<NotebookRun> {
  const opts = parseRunOptions(options);
  opts.signal?.throwIfAborted();
  const nb = await openNotebook(notebook, opts);
  const clock = opts.clock ?? systemClock;
  const executor = await createCellExecutor(opts, opts.language ?? notebookLanguage(nb), clock);
  const runner = new NotebookRunner(nb, opts, executor, clock);
  await runner.runCells();
  if (opts.outputPath !== undefined) await writeNotebook(opts.outputPath, nb);
  return runner.result();
}

/** The notebook to run (read, when a path), with the run's parameters injected. */
async function openNotebook(notebook: unknown, opts: RunNotebookOptions): Promise<Notebook> {
  const nb =
    typeof notebook === 'string'
      ? await readNotebook(notebook, opts.signal ? { signal: opts.signal } : {})
      : loadNotebook(notebook);
  const parameters = opts.parameters as Parameters | undefined;
  const hasParameters =
    parameters !== undefined &&
    (Array.isArray(parameters) ? parameters.length > 0 : Object.keys(parameters).length > 0);
  if (hasParameters) {
    const language = parameterLanguage(nb, opts.parameterLanguage);
    if (!language) {
      throw new NotebookParameterError(
        'cannot tell which language to write the parameters in: the notebook names no Python or R kernel (pass parameterLanguage)',
      );
    }
    injectParameters(nb, parameters, language);
  }
  return nb;
}

/** Why a cell is not run, if it is not: not code, blank, or tagged `skip-execution`. */
function skipReasonOf(cell: NotebookCell): CellReport['skipReason'] {
  if (cell.cell_type !== 'code') return 'not-code';
  if (isBlank(cell.source)) return 'blank';
  if (cellTags(cell).includes(SKIP_EXECUTION_TAG)) return 'skip-execution';
  return undefined;
}

/** Runs a notebook's cells one by one, building their outputs and reports, until the end or a cell stops the run. */
class NotebookRunner {
  readonly #nb: Notebook;
  readonly #opts: RunNotebookOptions;
  readonly #executor: CellExecutor;
  readonly #clock: Clock;
  readonly #runId = randomUUID().slice(0, 8);
  readonly #recordTiming: boolean;
  readonly #outputs: NotebookOutputs;
  readonly #reports: CellReport[] = [];
  readonly #run: NotebookRun;
  #executed = 0;
  #failure: NotebookError | undefined;
  #abortReason: { reason: unknown } | undefined;

  constructor(nb: Notebook, opts: RunNotebookOptions, executor: CellExecutor, clock: Clock) {
    this.#nb = nb;
    this.#opts = opts;
    this.#executor = executor;
    this.#clock = clock;
    this.#recordTiming = opts.recordTiming ?? true;
    this.#outputs = new NotebookOutputs(nb.cells, { recordTiming: this.#recordTiming });
    this.#run = { notebook: nb, cells: this.#reports };
  }

  /** Runs or skips every cell in order; after a cell stops the run, the rest are skipped as `'stopped'`. */
  async runCells(): Promise<void> {
    this.#setLanguageInfo();
    for (let index = 0; index < this.#nb.cells.length; index++) {
      const cell = this.#nb.cells[index]!;
      const skipReason = this.#failure || this.#abortReason ? 'stopped' : skipReasonOf(cell);
      if (skipReason === undefined) await this.#runCell(index, cell as CodeCell);
      else this.#skip(index, cell, skipReason);
    }
  }

  /** The run, or what stopped it: the signal's reason, else the cell's error (carrying the run). */
  result(): NotebookRun {
    if (this.#abortReason) throw this.#abortReason.reason;
    if (this.#failure) throw this.#failure;
    return this.#run;
  }

  #setLanguageInfo(): void {
    const info = this.#executor.languageInfo();
    if (info) this.#nb.metadata.language_info = info;
  }

  #report(r: CellReport): void {
    this.#reports.push(r);
    try {
      this.#opts.onCell?.(r);
    } catch {
      // a throwing progress callback must not break the run
    }
  }

  #skip(index: number, cell: NotebookCell, skipReason: CellReport['skipReason']): void {
    this.#report({
      index,
      id: cell.id,
      cellType: cell.cell_type,
      status: 'skipped',
      skipReason,
      executionCount: cell.cell_type === 'code' ? cell.execution_count : null,
      cell,
    });
  }

  /** Runs one code cell, writes its outputs and execution count into the notebook, and reports it. */
  async #runCell(index: number, cell: CodeCell): Promise<void> {
    const executionCount = this.#executed + 1;
    const sink = this.#outputs.begin(index);
    try {
      this.#opts.onCellStart?.({ index, id: cell.id, cell, executionCount });
    } catch {
      // ignored, as for onCell
    }
    const seen: Output[] = [];
    const started = this.#clock.now();
    const startedAt = new Date();
    const outcome = await this.#execute(index, cell, sink, seen);
    const durationMs = this.#clock.now() - started;
    this.#executed++;
    if (!sink.fromMessages) this.#buildFromOutputs(cell, sink, seen, outcome, startedAt);
    if (outcome.kind === 'result') cell.execution_count = executionCount;
    if (this.#opts.mergeStreams) cell.outputs = coalesceStreams(cell.outputs);
    this.#setLanguageInfo();
    this.#settle(index, cell, outcome, durationMs);
  }

  /** Executes the cell, its messages going to `sink` through the tap (when there is one) and its outputs to `seen`. */
  async #execute(index: number, cell: CodeCell, sink: CellOutputs, seen: Output[]): Promise<Outcome> {
    const cellId = `notebook-${this.#runId}-${index}`;
    const onOutput = (output: Output) => {
      seen.push(output);
      try {
        this.#opts.onOutput?.({ index, output });
      } catch {
        // ignored, as for onCell
      }
    };
    const unwatch = this.#opts.tap?.watch(
      cellId,
      (msg) => sink.message(msg),
      () => this.#executor.startBudget(),
    );
    try {
      return await this.#executor.execute(cell, cellId, onOutput);
    } finally {
      unwatch?.();
    }
  }

  /** No message of the cell was seen: builds what nbclient would from the outputs the kernel handle reported. */
  #buildFromOutputs(cell: CodeCell, sink: CellOutputs, seen: Output[], outcome: Outcome, startedAt: Date): void {
    for (const output of seen) sink.output(output);
    if (this.#recordTiming) {
      const execution = (cell.metadata.execution ?? {}) as JsonObject;
      const start = nbclientStamp(startedAt);
      const end = nbclientStamp(new Date());
      execution[TIMING_KEYS.busy] = start;
      execution[TIMING_KEYS.executeInput] = start;
      if (outcome.kind === 'result') {
        execution[TIMING_KEYS.idle] = end;
        execution[TIMING_KEYS.reply] = end;
      }
      cell.metadata.execution = execution;
    }
    const count = outcome.kind === 'result' ? outcome.result.executionCount : undefined;
    if (count !== undefined) cell.execution_count = count;
  }

  /** Reports the ran cell and, when its outcome stops the run, records what stopped it. */
  #settle(index: number, cell: CodeCell, outcome: Outcome, durationMs: number): void {
    const place = { cellIndex: index, cellId: cell.id };
    const base = {
      index,
      id: cell.id,
      cellType: 'code' as const,
      executionCount: cell.execution_count,
      cell,
      durationMs,
    };
    const result = 'result' in outcome ? outcome.result : undefined;
    const withResult = result ? { result } : {};
    if (outcome.kind === 'result') {
      const r = outcome.result;
      if (r.status === 'ok') {
        this.#report({ ...base, status: 'ok', ...withResult });
        return;
      }
      this.#report({ ...base, status: 'error', ...withResult });
      const error = r.error ?? { ename: 'CellAborted', evalue: `the kernel answered ${r.status}`, traceback: [] };
      const allowed =
        (this.#opts.allowErrors ?? false) ||
        cellTags(cell).includes(RAISES_EXCEPTION_TAG) ||
        (this.#opts.allowErrorNames ?? []).includes(error.ename);
      if (!allowed) this.#failure = new NotebookCellError(place, error, this.#run);
      return;
    }
    if (outcome.kind === 'timeout') {
      this.#report({ ...base, status: 'timeout', ...withResult });
      this.#failure = new NotebookCellTimeoutError(place, {
        timeoutMs: this.#executor.cellTimeoutMs,
        kernelReset: outcome.kernelReset,
        result: this.#run,
        cause: outcome.cause,
      });
      return;
    }
    this.#report({ ...base, status: 'error', ...withResult });
    if (outcome.kind === 'kernel') {
      this.#failure = new NotebookKernelError(place, outcome.message, { result: this.#run, cause: outcome.cause });
    } else {
      this.#abortReason = { reason: outcome.reason };
    }
  }
}

function nbclientStamp(date: Date): string {
  return `${date.toISOString().slice(0, 23)}000Z`;
}
