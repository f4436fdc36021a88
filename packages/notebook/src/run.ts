import { randomUUID } from 'node:crypto';
import {
  abortScope,
  type Clock,
  type ExecuteResult,
  effectiveTimeout,
  InvalidOptionsError,
  isClock,
  isTimeoutError,
  type KernelHandle,
  type Output,
  parseOptions,
  systemClock,
  type Timer,
} from '@kernelwarden/core';
import { KernelSupervisor, KernelUnavailableError } from '@kernelwarden/supervisor';
import { createWatchdog, type Watchdog } from '@kernelwarden/watchdog';
import { z } from 'zod/v3';
import {
  NotebookCellError,
  NotebookCellTimeoutError,
  type NotebookError,
  NotebookKernelError,
  NotebookParameterError,
} from './errors.js';
import { cellTags, loadNotebook, readNotebook, writeNotebook } from './format.js';
import { coalesceStreams, NotebookOutputs, TIMING_KEYS } from './outputs.js';
import { injectParameters, type Parameters, parameterLanguage } from './parameters.js';
import { isBlank } from './pyjson.js';
import type { MessageTap } from './tap.js';
import type { CellReport, CodeCell, JsonObject, Notebook, NotebookCell, NotebookRun } from './types.js';

/** The tag of cells that are not run (their outputs are kept as they are). */
export const SKIP_EXECUTION_TAG = 'skip-execution';
/** The tag of cells whose error does not stop the run. */
export const RAISES_EXCEPTION_TAG = 'raises-exception';
/**
 * With a session and a tap, a cell's budget starts when its request is sent; if the tap never sees it sent, the budget
 * still runs out this long after the call (time for the kernel to start): 120 s.
 */
export const START_ALLOWANCE_MS = 120_000;

/** What a run needs of a `KernelSession` (`@kernelwarden/supervisor`): `execute`, and its supervisor for `language_info`. */
export interface NotebookSession<L extends string = string> {
  execute(
    code: string,
    opts: { language?: L; cellId?: string; origin?: string; onOutput?: (o: Output) => void; signal?: AbortSignal },
  ): Promise<ExecuteResult>;
  readonly supervisor?: { lease(slot: string): { kernel: unknown } | undefined };
}

/** A cell about to run. */
export interface CellStartEvent {
  index: number;
  id: string | undefined;
  cell: CodeCell;
  /** The execution count the cell will get. */
  executionCount: number;
}

/** Options of `runNotebook()`. */
export interface RunNotebookOptions {
  /**
   * The session to run the cells in (the CLI's and MCP server's: its executor — the watchdog — bounds each cell).
   * Exactly one of `session` and `kernel` is required.
   */
  session?: NotebookSession<any>;
  /**
   * A kernel to run the cells on, under a watchdog made for the run (`cellTimeoutMs`, `interruptGraceMs`,
   * `killGraceMs`): a cell that overruns is interrupted, then the kernel killed and restarted. The kernel stays the
   * caller's: it is not shut down (unless the watchdog had to abandon it).
   */
  kernel?: KernelHandle;
  /**
   * The session slot the cells run in (`'python'`, `'r'`). @defaultValue from the notebook: `kernelspec.language`,
   * `language_info.name` or `kernelspec.name` (`ir` → `'r'`), else `'python'`
   */
  language?: string;
  /**
   * The message tap whose `wrap()` made the kernels' WebSockets. With it outputs are built from the kernel's
   * messages exactly as nbclient builds them (`clear_output`, `update_display_data`, display ids, the kernel's
   * timestamps); without it from `ExecuteResult` outputs (see the README's "Without a tap").
   */
  tap?: MessageTap;
  /** Parameters injected as papermill injects them (a cell tagged `injected-parameters`). */
  parameters?: Parameters;
  /** The language the parameters are written in. @defaultValue from the notebook, as papermill picks it */
  parameterLanguage?: 'python' | 'R';
  /** Go on after a cell raises (its error output is kept). @defaultValue false */
  allowErrors?: boolean;
  /** Error names (`ename`) that do not stop the run. @defaultValue [] */
  allowErrorNames?: string[];
  /**
   * Each cell's budget in milliseconds; `0` or `Infinity` disables it. With `kernel`: the run's watchdog budget
   * (default: the watchdog's, `KERNELWARDEN_CELL_TIMEOUT` or 900 s). With `session`: on top of the session's own
   * executor, by aborting the cell when it runs out (the session's watchdog then interrupts, kills, restarts).
   */
  cellTimeoutMs?: number;
  /** With `kernel`: the watchdog's wait after the interrupt. @defaultValue the watchdog's (10 s) */
  interruptGraceMs?: number;
  /** With `kernel`: the watchdog's wait after the kill. @defaultValue the watchdog's (10 s) */
  killGraceMs?: number;
  /** Merge each cell's stream outputs as nbclient's `coalesce_streams` does. @defaultValue false */
  mergeStreams?: boolean;
  /** Record `metadata.execution` timestamps under nbclient's keys. @defaultValue true */
  recordTiming?: boolean;
  /**
   * Write the notebook here when the run ends, also when a cell stopped it (as papermill does) — not when the input
   * could not be read. May be the input's own path.
   */
  outputPath?: string;
  /** Stops the run: the running cell is interrupted (through the watchdog), and the run rejects with the reason. */
  signal?: AbortSignal;
  /** The label kept on the session's and watchdog's events. @defaultValue 'notebook' */
  origin?: string;
  /** Measures `cellTimeoutMs` and `durationMs`. @defaultValue systemClock */
  clock?: Clock;
  /** Called before each code cell runs. */
  onCellStart?: (event: CellStartEvent) => void;
  /** Called with every output of the running cell as it arrives. */
  onOutput?: (event: { index: number; output: Output }) => void;
  /** Called after every cell, run or skipped, with its report. */
  onCell?: (report: CellReport) => void;
}

const callback = z.custom<(...args: never[]) => unknown>((v) => typeof v === 'function', 'must be a function');
const timeout = z
  .number()
  .refine((n) => !Number.isNaN(n), 'must be a number')
  .refine((n) => n >= 0, 'must be >= 0');
const optionsSchema = z
  .object({
    session: z
      .custom<NotebookSession>(
        (v) => v !== null && typeof v === 'object' && typeof (v as NotebookSession).execute === 'function',
        'must be a session with execute()',
      )
      .optional(),
    kernel: z
      .custom<KernelHandle>(
        (v) => v !== null && typeof v === 'object' && typeof (v as KernelHandle).execute === 'function',
        'must be a kernel with execute()',
      )
      .optional(),
    language: z.string().min(1).optional(),
    tap: z
      .custom<MessageTap>(
        (v) => v !== null && typeof v === 'object' && typeof (v as MessageTap).watch === 'function',
        'must be a MessageTap (createMessageTap())',
      )
      .optional(),
    parameters: z.union([z.record(z.string(), z.unknown()), z.array(z.tuple([z.string(), z.unknown()]))]).optional(),
    parameterLanguage: z.enum(['python', 'R']).optional(),
    allowErrors: z.boolean().optional(),
    allowErrorNames: z.array(z.string()).optional(),
    cellTimeoutMs: timeout.optional(),
    interruptGraceMs: timeout.optional(),
    killGraceMs: timeout.optional(),
    mergeStreams: z.boolean().optional(),
    recordTiming: z.boolean().optional(),
    outputPath: z.string().min(1).optional(),
    signal: z.custom<AbortSignal>((v) => v instanceof AbortSignal, 'must be an AbortSignal').optional(),
    origin: z.string().optional(),
    clock: z.custom<Clock>((v) => isClock(v), 'must be a Clock').optional(),
    onCellStart: callback.optional(),
    onOutput: callback.optional(),
    onCell: callback.optional(),
  })
  .strict();

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

/** A kernel's `language_info`, when it tells (a `GatewayKernel`'s `info`). */
function languageInfoOf(kernel: unknown): JsonObject | undefined {
  const info = (kernel as { info?: { content?: JsonObject } } | undefined)?.info;
  const languageInfo = info?.content?.language_info;
  return languageInfo !== null && typeof languageInfo === 'object' ? (languageInfo as JsonObject) : undefined;
}

/** How one cell's execution ended, as far as the run is concerned. */
type Outcome =
  | { kind: 'result'; result: ExecuteResult }
  | { kind: 'timeout'; result?: ExecuteResult; kernelReset: boolean; cause?: unknown }
  | { kind: 'kernel'; message: string; cause: unknown; result?: ExecuteResult }
  | { kind: 'aborted'; reason: unknown; result?: ExecuteResult };

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
  const opts = parseOptions(optionsSchema, options, {
    subject: 'runNotebook options',
    root: 'options',
  }) as unknown as RunNotebookOptions;
  if ((opts.session === undefined) === (opts.kernel === undefined)) {
    throw new InvalidOptionsError([{ path: 'options.session', message: 'give exactly one of session and kernel' }], {
      subject: 'runNotebook options',
    });
  }
  opts.signal?.throwIfAborted();
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

  const clock = opts.clock ?? systemClock;
  const language = opts.language ?? notebookLanguage(nb);
  const slot = 'notebook';
  const runId = randomUUID().slice(0, 8);
  let watchdog: Watchdog | undefined;
  let supervisor: KernelSupervisor<KernelHandle> | undefined;
  if (opts.kernel) {
    const kernel = opts.kernel;
    watchdog = createWatchdog({
      ...(opts.cellTimeoutMs === undefined ? {} : { cellTimeoutMs: opts.cellTimeoutMs }),
      ...(opts.interruptGraceMs === undefined ? {} : { interruptGraceMs: opts.interruptGraceMs }),
      ...(opts.killGraceMs === undefined ? {} : { killGraceMs: opts.killGraceMs }),
      clock,
    });
    supervisor = new KernelSupervisor<KernelHandle>({ idleTtlMs: 0, clock });
    await supervisor.ensure(slot, slot, async () => kernel);
  }
  const languageInfo = (): JsonObject | undefined =>
    opts.kernel ? languageInfoOf(opts.kernel) : languageInfoOf(opts.session?.supervisor?.lease(language)?.kernel);
  const setLanguageInfo = () => {
    const info = languageInfo();
    if (info) nb.metadata.language_info = info;
  };
  setLanguageInfo();

  const recordTiming = opts.recordTiming ?? true;
  const outputs = new NotebookOutputs(nb.cells, { recordTiming });
  const reports: CellReport[] = [];
  const run: NotebookRun = { notebook: nb, cells: reports };
  let executed = 0;
  let failure: NotebookError | undefined;
  let abortReason: { reason: unknown } | undefined;

  const report = (r: CellReport) => {
    reports.push(r);
    try {
      opts.onCell?.(r);
    } catch {
      // a throwing progress callback must not break the run
    }
  };
  const skip = (index: number, cell: NotebookCell, skipReason: CellReport['skipReason']) =>
    report({
      index,
      id: cell.id,
      cellType: cell.cell_type,
      status: 'skipped',
      skipReason,
      executionCount: cell.cell_type === 'code' ? cell.execution_count : null,
      cell,
    });

  let startBudget: (() => void) | undefined;
  const execute = async (cell: CodeCell, cellId: string, onOutput: (o: Output) => void): Promise<Outcome> => {
    if (watchdog && supervisor) {
      try {
        const result = await watchdog.run({
          supervisor,
          slot,
          code: cell.source,
          cellId,
          origin: opts.origin ?? 'notebook',
          onOutput,
          ...(opts.signal ? { signal: opts.signal } : {}),
        });
        if (result.timedOut) return { kind: 'timeout', result, kernelReset: false };
        if (result.cancelled && opts.signal?.aborted) return { kind: 'aborted', reason: opts.signal.reason, result };
        return { kind: 'result', result };
      } catch (error) {
        if (opts.signal?.aborted) return { kind: 'aborted', reason: opts.signal.reason };
        if (isTimeoutError(error)) return { kind: 'timeout', kernelReset: true, cause: error };
        return {
          kind: 'kernel',
          message: `the kernel could not run the cell: ${(error as Error).message}`,
          cause: error,
        };
      }
    }
    const session = opts.session!;
    // The budget starts when the cell is sent (the tap sees it go), so that starting the kernel or waiting for the
    // session's turn is not counted; without a tap it starts with the call.
    const budget = new AbortController();
    let timedOut = false;
    let timer: Timer | undefined;
    let guard: Timer | undefined;
    const ms = effectiveTimeout(opts.cellTimeoutMs);
    const expire = () => {
      timedOut = true;
      budget.abort(new DOMException(`cell exceeded ${ms} ms`, 'TimeoutError'));
    };
    const begin = () => {
      if (timer || budget.signal.aborted || ms === undefined) return;
      guard?.cancel();
      timer = clock.setTimer(expire, ms);
    };
    startBudget = begin;
    if (!opts.tap) begin();
    // A tap that never sees the cell go out (the kernel's socket is not one of its own) must not lift the budget.
    else if (ms !== undefined) guard = clock.setTimer(expire, ms + START_ALLOWANCE_MS);
    const scope = abortScope({ signal: opts.signal, clock });
    const onAbort = () => budget.abort(scope.signal.reason);
    scope.signal.addEventListener('abort', onAbort, { once: true });
    if (scope.signal.aborted) onAbort();
    try {
      const result = await session.execute(cell.source, {
        language,
        cellId,
        origin: opts.origin ?? 'notebook',
        onOutput,
        signal: budget.signal,
      });
      const unavailable = KernelUnavailableError.fromResult(result);
      if (unavailable) return { kind: 'kernel', message: unavailable.message, cause: unavailable, result };
      if (timedOut) return { kind: 'timeout', result, kernelReset: result.error === undefined };
      if (result.timedOut) return { kind: 'timeout', result, kernelReset: false };
      if (result.cancelled) {
        if (opts.signal?.aborted) return { kind: 'aborted', reason: opts.signal.reason, result };
        return {
          kind: 'kernel',
          message: 'the session cancelled the cell (it was stopped or closed)',
          cause: undefined,
          result,
        };
      }
      return { kind: 'result', result };
    } catch (error) {
      if (timedOut) return { kind: 'timeout', kernelReset: true, cause: error };
      if (opts.signal?.aborted) return { kind: 'aborted', reason: opts.signal.reason };
      if (isTimeoutError(error)) return { kind: 'timeout', kernelReset: true, cause: error };
      return {
        kind: 'kernel',
        message: `the kernel could not run the cell: ${(error as Error).message}`,
        cause: error,
      };
    } finally {
      timer?.cancel();
      guard?.cancel();
      startBudget = undefined;
      scope.signal.removeEventListener('abort', onAbort);
      scope.dispose();
    }
  };

  for (let index = 0; index < nb.cells.length; index++) {
    const cell = nb.cells[index]!;
    if (failure || abortReason) {
      skip(index, cell, 'stopped');
      continue;
    }
    if (cell.cell_type !== 'code') {
      skip(index, cell, 'not-code');
      continue;
    }
    if (isBlank(cell.source)) {
      skip(index, cell, 'blank');
      continue;
    }
    const tags = cellTags(cell);
    if (tags.includes(SKIP_EXECUTION_TAG)) {
      skip(index, cell, 'skip-execution');
      continue;
    }
    const executionCount = executed + 1;
    const sink = outputs.begin(index);
    try {
      opts.onCellStart?.({ index, id: cell.id, cell, executionCount });
    } catch {
      // ignored, as for onCell
    }
    const cellId = `notebook-${runId}-${index}`;
    const seen: Output[] = [];
    const onOutput = (output: Output) => {
      seen.push(output);
      try {
        opts.onOutput?.({ index, output });
      } catch {
        // ignored, as for onCell
      }
    };
    const unwatch = opts.tap?.watch(
      cellId,
      (msg) => sink.message(msg),
      () => startBudget?.(),
    );
    const started = clock.now();
    const startedAt = new Date();
    let outcome: Outcome;
    try {
      outcome = await execute(cell, cellId, onOutput);
    } finally {
      unwatch?.();
    }
    const durationMs = clock.now() - started;
    executed++;
    if (!sink.fromMessages) {
      // No message of the cell was seen: build what nbclient would from the outputs the kernel handle reported.
      for (const output of seen) sink.output(output);
      if (recordTiming) {
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
    if (outcome.kind === 'result') cell.execution_count = executionCount;
    if (opts.mergeStreams) cell.outputs = coalesceStreams(cell.outputs);
    setLanguageInfo();

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
        report({ ...base, status: 'ok', ...withResult });
        continue;
      }
      report({ ...base, status: 'error', ...withResult });
      const error = r.error ?? { ename: 'CellAborted', evalue: `the kernel answered ${r.status}`, traceback: [] };
      const allowed =
        (opts.allowErrors ?? false) ||
        tags.includes(RAISES_EXCEPTION_TAG) ||
        (opts.allowErrorNames ?? []).includes(error.ename);
      if (!allowed) failure = new NotebookCellError(place, error, run);
      continue;
    }
    if (outcome.kind === 'timeout') {
      report({ ...base, status: 'timeout', ...withResult });
      failure = new NotebookCellTimeoutError(place, {
        timeoutMs: opts.cellTimeoutMs ?? watchdog?.policy.cellTimeoutMs,
        kernelReset: outcome.kernelReset,
        result: run,
        cause: outcome.cause,
      });
      continue;
    }
    if (outcome.kind === 'kernel') {
      report({ ...base, status: 'error', ...withResult });
      failure = new NotebookKernelError(place, outcome.message, { result: run, cause: outcome.cause });
      continue;
    }
    report({ ...base, status: 'error', ...withResult });
    abortReason = { reason: outcome.reason };
  }

  if (opts.outputPath !== undefined) await writeNotebook(opts.outputPath, nb);
  if (abortReason) throw abortReason.reason;
  if (failure) throw failure;
  return run;
}

function nbclientStamp(date: Date): string {
  return `${date.toISOString().slice(0, 23)}000Z`;
}
