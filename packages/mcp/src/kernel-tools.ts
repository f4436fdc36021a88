import type { ExecuteResult, Timer } from '@kernelwarden/core';
import type { BackgroundPeek, KernelSession, SupervisedKernel } from '@kernelwarden/supervisor';
import { backgroundAnswer } from './background-answer.js';
import { describeOutcome } from './cell-outcome.js';
import { CellRun, type KernelLanguage, MAX_TIMER_MS } from './cell-run.js';
import type { KernelToolResult } from './cell-transcript.js';
import { CellRecord } from './notebook-tools.js';
import { ProgressReporter } from './progress.js';
import { sourceProblem } from './source-check.js';
import type { KernelToolCall } from './tool-call.js';
import type { ResolvedKernelToolOptions } from './tool-options.js';
import { cells, messageOf, seconds, text } from './tool-text.js';

export type { KernelLanguage } from './cell-run.js';
export type { KernelToolCall } from './tool-call.js';

/** The input of `run_code`. */
export interface RunCodeInput {
  code: string;
  /** @defaultValue 'python' */
  language?: KernelLanguage | undefined;
  /** Overrides the server's default timeout for this call; `0` means none. It bounds the whole cell. */
  timeout_seconds?: number | undefined;
  /**
   * How long this call waits for the cell before answering with the output so far and an id to follow it with
   * (the cell goes on); `0` waits for the end. Overrides the `maxWaitMs` option.
   */
  max_wait_seconds?: number | undefined;
}

/** How `runCode` answers: wait up to the input's (or the option's) `max_wait`, or for the end whatever it says. */
export interface RunCodeMode {
  /** `'end'`: answer only with the final result (an MCP task's run). @defaultValue 'max-wait' */
  until?: 'max-wait' | 'end';
}

const LABEL: Record<KernelLanguage, string> = { python: 'Python', r: 'R' };
/** The marker for "this language's kernel went away without the model having been told". */
const GONE = '';
/** Finished cells whose final result nobody has asked for, kept at most (the oldest go first). */
const MAX_UNCOLLECTED = 64;
/** Ids of cells whose final result was returned, remembered so that asking again gets a plain answer. */
const MAX_COLLECTED = 256;

/**
 * The behaviour behind the tools, shared by the MCP server and the AI SDK tools: runs cells on a `KernelSession`,
 * shapes the results for a model, applies per-cell timeouts, answers before a host's request timeout with an id
 * for a cell that is still running, and says plainly when a kernel lost its variables.
 *
 * One per session; the MCP server and `createAgentTools()` make theirs.
 */
export class KernelTools<K extends SupervisedKernel = SupervisedKernel, H = unknown, L extends string = never> {
  readonly #session: KernelSession<K, H, L>;
  readonly #options: ResolvedKernelToolOptions;
  /** The lease each language's last call ended on: a different one at the next call means the kernel was reset. */
  readonly #seen = new Map<KernelLanguage, string>();
  /** Cells not ended yet, in the order they were sent. */
  readonly #active = new Set<CellRun>();
  /** Cells answered while running, by id, until their final result is returned. */
  readonly #runs = new Map<string, CellRun>();
  readonly #collected = new Set<string>();
  /** The cells `run_code` ran and their results, per language (bounded): what `save_notebook` writes. */
  readonly record = new CellRecord();

  /** Runs the tools on `session`, shaping results as `options` say (`resolveKernelToolOptions`). */
  constructor(session: KernelSession<K, H, L>, options: ResolvedKernelToolOptions) {
    this.#session = session;
    this.#options = options;
  }

  /**
   * Runs `input.code` in the session's kernel of its language; never rejects. Answers with the final result, or —
   * when the cell is still running after `max_wait_seconds` (else the `maxWaitMs` option) — with the output so far
   * and the cell's id (`structuredContent.exec_id`), which `checkBackground` and `cancelCell` take.
   */
  async runCode(input: RunCodeInput, call: KernelToolCall = {}, mode: RunCodeMode = {}): Promise<KernelToolResult> {
    const refused = sourceProblem(input.code, this.#options.maxSourceBytes);
    if (refused) return text(refused, true);
    const run = this.#launch(input);
    const maxWaitMs =
      mode.until === 'end'
        ? Number.POSITIVE_INFINITY
        : input.max_wait_seconds !== undefined
          ? input.max_wait_seconds * 1000
          : this.#options.maxWaitMs;
    const onCallerAbort = () => run.stop('cancel', call.signal?.reason, this.#leaseKey(run.language));
    if (call.signal?.aborted) onCallerAbort();
    else call.signal?.addEventListener('abort', onCallerAbort, { once: true });
    try {
      // The caller's abort stops the cell; the answer then waits for it to end (the executor's ladder bounds that).
      await this.#follow(run, maxWaitMs > 0 ? maxWaitMs : Number.POSITIVE_INFINITY, { onProgress: call.onProgress });
      if (call.signal?.aborted) await run.settled;
    } finally {
      call.signal?.removeEventListener('abort', onCallerAbort);
    }
    if (run.final) return run.final;
    this.#runs.set(run.id, run);
    return run.partial(this.#stillRunning(run));
  }

  /**
   * Stops a cell: a `run_code` cell answered while running (`cell-…`) or a background cell (`exec-…`). The kernel
   * is interrupted through the session's executor — with the watchdog, its ladder — and the answer, after waiting
   * up to the `maxWaitMs` option for the cell to end, is what `checkBackground` would say. Never rejects.
   */
  async cancelCell(execId: string, signal?: AbortSignal): Promise<KernelToolResult> {
    const run = this.#runs.get(execId);
    if (run) {
      run.stop('cancel', new DOMException('cancelled with cancel_cell', 'AbortError'), this.#leaseKey(run.language));
      return this.#checkRun(run, this.#maxWaitSeconds(), { signal });
    }
    if (this.#collected.has(execId)) return this.#alreadyReturned(execId);
    try {
      this.#session.peekBackground(execId);
      await this.#session.interruptBackground(execId, signal ? { signal } : {});
    } catch (error) {
      return text(messageOf(error), true);
    }
    return this.checkBackground(execId, this.#maxWaitSeconds(), signal);
  }

  #maxWaitSeconds(): number {
    return this.#options.maxWaitMs > 0 ? this.#options.maxWaitMs / 1000 : 600;
  }

  /** Starts a cell: after the cells ahead of it, bounded by its timeout from the moment it can start. */
  #launch(input: RunCodeInput): CellRun {
    const language = input.language ?? 'python';
    const timeoutMs =
      input.timeout_seconds === undefined ? this.#options.defaultTimeoutMs : Math.max(0, input.timeout_seconds * 1000);
    const run = new CellRun(language, [...this.#active], this.#options);
    this.#active.add(run);
    let timer: Timer | undefined;
    const arm = () => {
      if (run.final || timeoutMs <= 0 || timeoutMs > MAX_TIMER_MS) return;
      timer = this.#options.clock.setTimer(
        () =>
          run.stop(
            'timeout',
            new DOMException(`cell exceeded ${seconds(timeoutMs)}`, 'TimeoutError'),
            this.#leaseKey(language),
          ),
        timeoutMs,
      );
    };
    const ahead = run.ahead.filter((other) => other.final === undefined);
    if (ahead.length === 0) arm();
    else void Promise.all(ahead.map((other) => other.settled)).then(arm);
    const before = this.#seen.get(language);
    void this.#execute(run, input.code, { language, timeoutMs, before, cancelTimer: () => timer?.cancel() });
    return run;
  }

  /** Runs the cell on the session (started at once), records it, and finishes `run` with how it ended. */
  async #execute(
    run: CellRun,
    code: string,
    c: { language: KernelLanguage; timeoutMs: number; before: string | undefined; cancelTimer: () => void },
  ): Promise<void> {
    const { language } = c;
    let result: ExecuteResult | undefined;
    let failure: unknown;
    try {
      result = await this.#session.execute(code, {
        language,
        origin: 'agent',
        signal: run.signal,
        onOutput: run.onOutput,
      });
    } catch (error) {
      failure = error;
    } finally {
      c.cancelTimer();
      this.#active.delete(run);
    }
    if (result) this.record.add(language, code, result);
    this.#finish(run, { ...c, result, failure });
  }

  /**
   * Tells `run` how its cell ended: the outcome, a reset of the kernel since the last call (once), and the cells it
   * waited for; then remembers the kernel's lease for the next call.
   */
  #finish(
    run: CellRun,
    c: {
      language: KernelLanguage;
      timeoutMs: number;
      before: string | undefined;
      result: ExecuteResult | undefined;
      failure: unknown;
    },
  ): void {
    const { language, timeoutMs, before, result, failure } = c;
    const label = LABEL[language];
    const stoppedBy = run.stoppedBy;
    const after = this.#leaseKey(language);
    const resetDuringCall = run.leaseWhenStopped !== undefined && after !== run.leaseWhenStopped;
    const resetBefore = !resetDuringCall && before !== undefined && before !== after && result !== undefined;
    const outcome = describeOutcome({
      language,
      label,
      result,
      failure,
      stoppedBy,
      timeoutMs,
      resetDuringCall,
      restarted: after !== undefined,
    });
    // A reset the model has just been told about must not be reported again at the next call.
    if (after !== undefined) this.#seen.set(language, after);
    else if (outcome.toldReset) this.#seen.delete(language);
    else if (before !== undefined) this.#seen.set(language, GONE);

    let notice = outcome.notice;
    if (resetBefore && !outcome.toldReset) {
      const note = `Note: the ${label} kernel was restarted since the last call (it died or was reset), so variables from earlier calls are gone.`;
      notice = notice ? `${note}\n${notice}` : note;
    }
    const waitedFor = run.ahead.filter((other) => other.yielded).map((other) => other.id);
    run.finish({
      addResult: result ? (transcript) => transcript.addResult(result) : undefined,
      isError: outcome.isError,
      notice,
      preface:
        waitedFor.length > 0
          ? `This cell waited for ${cells(waitedFor)} to finish first (the session runs one cell at a time).`
          : undefined,
    });
    this.#forgetOldRuns();
  }

  /** Waits up to `ms` for `run` to end, feeding its output to the call's progress meanwhile. */
  async #follow(run: CellRun, ms: number, call: KernelToolCall): Promise<void> {
    const progress = call.onProgress
      ? new ProgressReporter(call.onProgress, {
          clock: this.#options.clock,
          intervalMs: this.#options.progressIntervalMs,
          heartbeatMs: this.#options.heartbeatMs,
        })
      : undefined;
    const detach = progress ? run.listen(progress.onOutput) : undefined;
    progress?.start();
    try {
      await run.wait(ms, call.signal);
    } finally {
      progress?.stop();
      detach?.();
    }
  }

  /** What an answer given while `run` still runs says after its output. */
  #stillRunning(run: CellRun): string {
    const label = LABEL[run.language];
    const elapsed = Math.round((this.#options.clock.now() - run.startedAt) / 1000);
    const wait = Math.round(this.#maxWaitSeconds());
    const state = run.queued
      ? `The cell has not started yet: it waits for ${cells(run.ahead.filter((o) => !o.final && o.yielded).map((o) => o.id)) || 'an earlier cell'} to finish (the session runs one cell at a time). It will run in the ${label} kernel`
      : `The cell is still running (${elapsed}s so far) in the ${label} kernel, which keeps its variables; nothing was stopped`;
    return (
      `${state}. Its id is ${run.id}: call check_background { "exec_id": "${run.id}", "wait_seconds": ${wait} } ` +
      `for the rest of its output and its result, or cancel_cell { "exec_id": "${run.id}" } to interrupt it. ` +
      'Other run_code calls wait until it ends.'
    );
  }

  async #checkRun(run: CellRun, waitSeconds: number, call: KernelToolCall): Promise<KernelToolResult> {
    if (!run.final && waitSeconds > 0) await this.#follow(run, waitSeconds * 1000, call);
    const final = run.final;
    if (!final) return run.partial(this.#stillRunning(run));
    this.#runs.delete(run.id);
    this.#collected.add(run.id);
    if (this.#collected.size > MAX_COLLECTED) this.#collected.delete(this.#collected.values().next().value!);
    return final;
  }

  #alreadyReturned(execId: string): KernelToolResult {
    return text(`Cell ${execId} has ended, and its result was already returned.`, false);
  }

  /** Drops the oldest finished cells nobody asked about, past `MAX_UNCOLLECTED`. */
  #forgetOldRuns(): void {
    const finished = [...this.#runs.values()].filter((run) => run.final);
    for (const run of finished.slice(0, Math.max(0, finished.length - MAX_UNCOLLECTED))) this.#runs.delete(run.id);
  }

  /** Restarts a language's kernel: a fresh interpreter, its variables gone. Never rejects. */
  async restart(language: KernelLanguage, signal?: AbortSignal): Promise<KernelToolResult> {
    const label = LABEL[language];
    try {
      if (language === 'python') {
        await this.#session.restart(signal ? { signal } : {});
      } else {
        const supervisor = this.#session.supervisor;
        const lease = supervisor.lease(language);
        if (!lease?.kernel.isAlive()) {
          this.#seen.delete(language);
          return text(`The R kernel was not running; the next R cell starts a fresh one.`, false);
        }
        const restarted = await supervisor.restartIfCurrent(lease, signal ? { signal } : {});
        if (!restarted)
          return text('The R kernel was replaced while restarting it; the next R cell uses the new one.', false);
      }
      const key = this.#leaseKey(language);
      if (key !== undefined) this.#seen.set(language, key);
      else this.#seen.delete(language);
      return text(`The ${label} kernel was restarted: its variables are gone.`, false);
    } catch (error) {
      return text(`The ${label} kernel could not be restarted: ${messageOf(error)}`, true);
    }
  }

  /** Starts `code` in the background on a Python kernel of its own; answers with its id at once. */
  startBackground(code: string): KernelToolResult {
    const refused = sourceProblem(code, this.#options.maxSourceBytes);
    if (refused) return text(refused, true);
    try {
      const { execId } = this.#session.runBackground(code, { origin: 'agent' });
      return text(
        `Started background cell ${execId} on a Python kernel of its own (variables of run_code are not visible ` +
          `there, and it keeps none afterwards). Check it with check_background { "exec_id": "${execId}" }.`,
        false,
      );
    } catch (error) {
      return text(`The background cell could not start: ${messageOf(error)}`, true);
    }
  }

  /**
   * Reports a cell's status and output, after waiting up to `waitSeconds` for it to end: a background cell's output
   * so far, or — for a `run_code` cell answered while running — its output since the last answer, then its final
   * result exactly as `run_code` would have given it.
   */
  async checkBackground(
    execId: string,
    waitSeconds = 0,
    signal?: AbortSignal,
    onProgress?: KernelToolCall['onProgress'],
  ): Promise<KernelToolResult> {
    const run = this.#runs.get(execId);
    if (run) return this.#checkRun(run, waitSeconds, { signal, onProgress });
    if (this.#collected.has(execId)) return this.#alreadyReturned(execId);
    try {
      let peek = this.#session.peekBackground(execId);
      if (!peek.done && waitSeconds > 0) peek = await this.#waitBackground(execId, waitSeconds, signal);
      return backgroundAnswer(execId, peek, this.#options);
    } catch (error) {
      return text(messageOf(error), true);
    }
  }

  /** Waits up to `waitSeconds` (or until `signal`) for a background cell to end; what it is then. */
  async #waitBackground(execId: string, waitSeconds: number, signal: AbortSignal | undefined): Promise<BackgroundPeek> {
    const wait = new AbortController();
    const timer = this.#options.clock.setTimer(() => wait.abort(), waitSeconds * 1000);
    const onAbort = () => wait.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      return await this.#session.waitBackground(execId, { signal: wait.signal });
    } catch {
      return this.#session.peekBackground(execId);
    } finally {
      timer.cancel();
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** The live lease of a language's slot, or `undefined` when it holds no live kernel. */
  #leaseKey(language: KernelLanguage): string | undefined {
    const lease = this.#session.supervisor.lease(language);
    return lease?.kernel.isAlive() ? lease.id : undefined;
  }
}
