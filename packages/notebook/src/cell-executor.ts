import {
  abortScope,
  type Clock,
  type ExecuteResult,
  effectiveTimeout,
  isTimeoutError,
  type KernelHandle,
  type Output,
  type Timer,
} from '@kernelwarden/core';
import { KernelSupervisor, KernelUnavailableError } from '@kernelwarden/supervisor';
import { createWatchdog } from '@kernelwarden/watchdog';
import type { NotebookSession, RunNotebookOptions } from './run-options.js';
import type { CodeCell, JsonObject } from './types.js';

/**
 * With a session and a tap, a cell's budget starts when its request is sent; if the tap never sees it sent, the budget
 * still runs out this long after the call (time for the kernel to start): 120 s.
 */
export const START_ALLOWANCE_MS = 120_000;

/** How one cell's execution ended, as far as the run is concerned. */
export type Outcome =
  | { kind: 'result'; result: ExecuteResult }
  | { kind: 'timeout'; result?: ExecuteResult; kernelReset: boolean; cause?: unknown }
  | { kind: 'kernel'; message: string; cause: unknown; result?: ExecuteResult }
  | { kind: 'aborted'; reason: unknown; result?: ExecuteResult };

/** Runs a notebook's cells on the run's kernel: the caller's kernel under a watchdog, or the caller's session. */
export interface CellExecutor {
  /** Runs one cell to its outcome; never rejects. */
  execute(cell: CodeCell, cellId: string, onOutput: (o: Output) => void): Promise<Outcome>;
  /** Starts the running cell's budget: its request went out (the tap saw it). */
  startBudget(): void;
  /** The cell budget in effect, for a timeout's error. */
  readonly cellTimeoutMs: number | undefined;
  /** The kernel's `language_info`, when it tells. */
  languageInfo(): JsonObject | undefined;
}

/** What a run's options say about running cells. */
type ExecutorOptions = Pick<
  RunNotebookOptions,
  'cellTimeoutMs' | 'interruptGraceMs' | 'killGraceMs' | 'origin' | 'signal' | 'tap'
>;

/** A kernel's `language_info`, when it tells (a `GatewayKernel`'s `info`). */
function languageInfoOf(kernel: unknown): JsonObject | undefined {
  const info = (kernel as { info?: { content?: JsonObject } } | undefined)?.info;
  const languageInfo = info?.content?.language_info;
  return languageInfo !== null && typeof languageInfo === 'object' ? (languageInfo as JsonObject) : undefined;
}

/** The outcome of a cell whose execution threw (and whose own budget did not run out). */
function failedOutcome(error: unknown, signal: AbortSignal | undefined): Outcome {
  if (signal?.aborted) return { kind: 'aborted', reason: signal.reason };
  if (isTimeoutError(error)) return { kind: 'timeout', kernelReset: true, cause: error };
  return {
    kind: 'kernel',
    message: `the kernel could not run the cell: ${(error as Error).message}`,
    cause: error,
  };
}

/** Runs cells on the caller's kernel under a watchdog made for the run (which interrupts, kills, restarts). */
async function kernelExecutor(kernel: KernelHandle, opts: ExecutorOptions, clock: Clock): Promise<CellExecutor> {
  const slot = 'notebook';
  const watchdog = createWatchdog({
    ...(opts.cellTimeoutMs === undefined ? {} : { cellTimeoutMs: opts.cellTimeoutMs }),
    ...(opts.interruptGraceMs === undefined ? {} : { interruptGraceMs: opts.interruptGraceMs }),
    ...(opts.killGraceMs === undefined ? {} : { killGraceMs: opts.killGraceMs }),
    clock,
  });
  const supervisor = new KernelSupervisor<KernelHandle>({ idleTtlMs: 0, clock });
  await supervisor.ensure(slot, slot, async () => kernel);
  return {
    cellTimeoutMs: opts.cellTimeoutMs ?? watchdog.policy.cellTimeoutMs,
    startBudget: () => {},
    languageInfo: () => languageInfoOf(kernel),
    async execute(cell, cellId, onOutput) {
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
        return failedOutcome(error, opts.signal);
      }
    },
  };
}

/** One cell's budget in a session: aborts its signal when the budget runs out or the run's signal aborts. */
interface CellBudget {
  readonly signal: AbortSignal;
  readonly timedOut: boolean;
  /** Starts the budget (once). */
  begin(): void;
  dispose(): void;
}

/**
 * The budget starts when the cell is sent (the tap sees it go), so that starting the kernel or waiting for the
 * session's turn is not counted; without a tap it starts now.
 */
function startCellBudget(opts: ExecutorOptions, clock: Clock): CellBudget {
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
  if (!opts.tap) begin();
  // A tap that never sees the cell go out (the kernel's socket is not one of its own) must not lift the budget.
  else if (ms !== undefined) guard = clock.setTimer(expire, ms + START_ALLOWANCE_MS);
  const scope = abortScope({ signal: opts.signal, clock });
  const onAbort = () => budget.abort(scope.signal.reason);
  scope.signal.addEventListener('abort', onAbort, { once: true });
  if (scope.signal.aborted) onAbort();
  return {
    signal: budget.signal,
    get timedOut() {
      return timedOut;
    },
    begin,
    dispose() {
      timer?.cancel();
      guard?.cancel();
      scope.signal.removeEventListener('abort', onAbort);
      scope.dispose();
    },
  };
}

/** The outcome of a cell the session answered. */
function sessionOutcome(result: ExecuteResult, timedOut: boolean, signal: AbortSignal | undefined): Outcome {
  const unavailable = KernelUnavailableError.fromResult(result);
  if (unavailable) return { kind: 'kernel', message: unavailable.message, cause: unavailable, result };
  if (timedOut) return { kind: 'timeout', result, kernelReset: result.error === undefined };
  if (result.timedOut) return { kind: 'timeout', result, kernelReset: false };
  if (result.cancelled) {
    if (signal?.aborted) return { kind: 'aborted', reason: signal.reason, result };
    return {
      kind: 'kernel',
      message: 'the session cancelled the cell (it was stopped or closed)',
      cause: undefined,
      result,
    };
  }
  return { kind: 'result', result };
}

/** Runs cells in the caller's session (its executor bounds each cell), within the run's own cell budget. */
function sessionExecutor(
  session: NotebookSession<any>,
  opts: ExecutorOptions,
  language: string,
  clock: Clock,
): CellExecutor {
  let running: CellBudget | undefined;
  return {
    cellTimeoutMs: opts.cellTimeoutMs,
    startBudget: () => running?.begin(),
    languageInfo: () => languageInfoOf(session.supervisor?.lease(language)?.kernel),
    async execute(cell, cellId, onOutput) {
      const budget = startCellBudget(opts, clock);
      running = budget;
      try {
        const result = await session.execute(cell.source, {
          language,
          cellId,
          origin: opts.origin ?? 'notebook',
          onOutput,
          signal: budget.signal,
        });
        return sessionOutcome(result, budget.timedOut, opts.signal);
      } catch (error) {
        if (budget.timedOut) return { kind: 'timeout', kernelReset: true, cause: error };
        return failedOutcome(error, opts.signal);
      } finally {
        running = undefined;
        budget.dispose();
      }
    },
  };
}

/** The executor of a run: on `opts.kernel` when given, else in `opts.session`. */
export async function createCellExecutor(
  opts: Pick<RunNotebookOptions, 'kernel' | 'session'> & ExecutorOptions,
  language: string,
  clock: Clock,
): Promise<CellExecutor> {
  if (opts.kernel) return kernelExecutor(opts.kernel, opts, clock);
  return sessionExecutor(opts.session!, opts, language, clock);
}
