import { type ExecuteResult, KernelwardenError } from '@kernelwarden/core';
import {
  type KernelSession,
  KernelUnavailableError,
  type SupervisedKernel,
  UnknownLanguageError,
} from '@kernelwarden/supervisor';
import { CellTimeoutError } from '@kernelwarden/watchdog';
import { CellTranscript, type KernelToolResult } from './cell-transcript.js';
import { ProgressReporter, type ProgressUpdate } from './progress.js';
import { sourceProblem } from './source-check.js';
import type { ResolvedKernelToolOptions } from './tool-options.js';

/** A language the tools run: each has its own kernel in the session, in the supervisor slot of that name. */
export type KernelLanguage = 'python' | 'r';

/** The input of `run_code`. */
export interface RunCodeInput {
  code: string;
  /** @defaultValue 'python' */
  language?: KernelLanguage | undefined;
  /** Overrides the server's default timeout for this call; `0` means none. */
  timeout_seconds?: number | undefined;
}

/** What a tool call brings besides its input: the caller's abort signal and, when wanted, a progress sink. */
export interface KernelToolCall {
  /** Aborting it interrupts the cell (and lets the watchdog kill and restart a kernel that ignores that). */
  signal?: AbortSignal | undefined;
  /** Receives progress while the cell runs; absent = no progress is computed. */
  onProgress?: ((update: ProgressUpdate) => void) | undefined;
}

const LABEL: Record<KernelLanguage, string> = { python: 'Python', r: 'R' };
/** Node's timers cannot wait longer (they would fire at once); a longer timeout is no timeout. */
const MAX_TIMER_MS = 2_147_483_647;
/** The marker for "this language's kernel went away without the model having been told". */
const GONE = '';

/**
 * The behaviour behind the tools, shared by the MCP server and the AI SDK tools: runs cells on a `KernelSession`,
 * shapes the results for a model, applies per-call timeouts, and says plainly when a kernel lost its variables.
 *
 * One per session; the MCP server and `createAgentTools()` make theirs.
 */
export class KernelTools<K extends SupervisedKernel = SupervisedKernel, H = unknown, L extends string = never> {
  readonly #session: KernelSession<K, H, L>;
  readonly #options: ResolvedKernelToolOptions;
  /** The lease each language's last call ended on: a different one at the next call means the kernel was reset. */
  readonly #seen = new Map<KernelLanguage, string>();

  /** Runs the tools on `session`, shaping results as `options` say (`resolveKernelToolOptions`). */
  constructor(session: KernelSession<K, H, L>, options: ResolvedKernelToolOptions) {
    this.#session = session;
    this.#options = options;
  }

  /** Runs `input.code` in the session's kernel of its language; never rejects. */
  async runCode(input: RunCodeInput, call: KernelToolCall = {}): Promise<KernelToolResult> {
    const refused = sourceProblem(input.code, this.#options.maxSourceBytes);
    if (refused) return text(refused, true);
    const language = input.language ?? 'python';
    const label = LABEL[language];
    const transcript = new CellTranscript(this.#options);
    const timeoutMs =
      input.timeout_seconds === undefined ? this.#options.defaultTimeoutMs : Math.max(0, input.timeout_seconds * 1000);
    const controller = new AbortController();
    let stoppedBy: 'timeout' | 'cancel' | undefined;
    let leaseWhenStopped: string | undefined;
    const stop = (why: 'timeout' | 'cancel', reason: unknown) => {
      if (controller.signal.aborted) return;
      stoppedBy = why;
      leaseWhenStopped = this.#leaseKey(language);
      controller.abort(reason);
    };
    const timer =
      timeoutMs > 0 && timeoutMs <= MAX_TIMER_MS
        ? this.#options.clock.setTimer(
            () => stop('timeout', new DOMException(`cell exceeded ${seconds(timeoutMs)}`, 'TimeoutError')),
            timeoutMs,
          )
        : undefined;
    const onCallerAbort = () => stop('cancel', call.signal?.reason);
    if (call.signal?.aborted) onCallerAbort();
    else call.signal?.addEventListener('abort', onCallerAbort, { once: true });
    const progress = call.onProgress
      ? new ProgressReporter(call.onProgress, {
          clock: this.#options.clock,
          intervalMs: this.#options.progressIntervalMs,
          heartbeatMs: this.#options.heartbeatMs,
        })
      : undefined;
    const before = this.#seen.get(language);

    let result: ExecuteResult | undefined;
    let failure: unknown;
    progress?.start();
    try {
      result = await this.#session.execute(input.code, {
        language,
        origin: 'agent',
        signal: controller.signal,
        onOutput: (output) => {
          transcript.onOutput(output);
          progress?.onOutput(output);
        },
      });
    } catch (error) {
      failure = error;
    } finally {
      timer?.cancel();
      progress?.stop();
      call.signal?.removeEventListener('abort', onCallerAbort);
    }

    const after = this.#leaseKey(language);
    const resetDuringCall = leaseWhenStopped !== undefined && after !== leaseWhenStopped;
    const resetBefore = !resetDuringCall && before !== undefined && before !== after && result !== undefined;
    if (result) transcript.addResult(result);
    const outcome = this.#describe({ language, label, result, failure, stoppedBy, timeoutMs, resetDuringCall });
    // A reset the model has just been told about must not be reported again at the next call.
    if (after !== undefined) this.#seen.set(language, after);
    else if (outcome.toldReset) this.#seen.delete(language);
    else if (before !== undefined) this.#seen.set(language, GONE);

    let notice = outcome.notice;
    if (resetBefore && !outcome.toldReset) {
      const note = `Note: the ${label} kernel was restarted since the last call (it died or was reset), so variables from earlier calls are gone.`;
      notice = notice ? `${note}\n${notice}` : note;
    }
    return transcript.finish({ isError: outcome.isError, ...(notice ? { notice } : {}) });
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

  /** Reports a background cell's status and output so far, after waiting up to `waitSeconds` for it to end. */
  async checkBackground(execId: string, waitSeconds = 0, signal?: AbortSignal): Promise<KernelToolResult> {
    try {
      let peek = this.#session.peekBackground(execId);
      if (!peek.done && waitSeconds > 0) {
        const wait = new AbortController();
        const timer = this.#options.clock.setTimer(() => wait.abort(), waitSeconds * 1000);
        const onAbort = () => wait.abort();
        signal?.addEventListener('abort', onAbort, { once: true });
        try {
          peek = await this.#session.waitBackground(execId, { signal: wait.signal });
        } catch {
          peek = this.#session.peekBackground(execId);
        } finally {
          timer.cancel();
          signal?.removeEventListener('abort', onAbort);
        }
      }
      const transcript = new CellTranscript(this.#options);
      if (peek.result && !peek.truncated) {
        for (const output of peek.result.outputs) transcript.onOutput(output);
        transcript.addResult(peek.result);
      } else {
        transcript.onOutput({ type: 'stream', name: 'stdout', text: peek.stdout });
        transcript.onOutput({ type: 'stream', name: 'stderr', text: peek.stderr });
      }
      const status =
        peek.status === 'running'
          ? `Background cell ${execId} is still running; this is its output so far.`
          : `Background cell ${execId} ${peek.status === 'done' ? 'finished' : peek.status}${peek.error ? `: ${peek.error}` : ''}.`;
      return transcript.finish({ isError: peek.status === 'failed', notice: status });
    } catch (error) {
      return text(messageOf(error), true);
    }
  }

  /** The live lease of a language's slot, or `undefined` when it holds no live kernel. */
  #leaseKey(language: KernelLanguage): string | undefined {
    const lease = this.#session.supervisor.lease(language);
    return lease?.kernel.isAlive() ? lease.id : undefined;
  }

  #describe(c: {
    language: KernelLanguage;
    label: string;
    result: ExecuteResult | undefined;
    failure: unknown;
    stoppedBy: 'timeout' | 'cancel' | undefined;
    timeoutMs: number;
    resetDuringCall: boolean;
  }): { isError: boolean; notice?: string; toldReset: boolean } {
    const { label, result, failure, stoppedBy } = c;
    const lost = `variables from earlier calls are gone: re-run the imports and setup your next cells need`;
    const why =
      stoppedBy === 'timeout' ? `ran past its ${seconds(c.timeoutMs)} timeout` : 'was cancelled by the client';
    if (stoppedBy && c.resetDuringCall) {
      return {
        isError: true,
        toldReset: true,
        notice: `The cell ${why} and did not stop when interrupted, so the ${label} kernel was restarted: ${lost}.`,
      };
    }
    if (failure !== undefined) {
      if (CellTimeoutError.isInstance(failure)) return { isError: true, toldReset: true, notice: failure.message };
      if (KernelwardenError.isInstance(failure) && failure.code === 'KERNEL_DIED') {
        return {
          isError: true,
          toldReset: true,
          notice: `The ${label} kernel died while running the cell (${failure.message}). It was restarted: ${lost}.`,
        };
      }
      if (UnknownLanguageError.isInstance(failure)) {
        return { isError: true, toldReset: false, notice: `This server has no ${label} kernel.` };
      }
      return {
        isError: true,
        toldReset: false,
        notice: `The ${label} kernel could not run the cell: ${messageOf(failure)}`,
      };
    }
    if (stoppedBy || result?.timedOut || result?.cancelled) {
      const what = stoppedBy === 'cancel' ? 'was cancelled by the client' : stoppedBy ? why : 'ran past its timeout';
      return {
        isError: true,
        toldReset: false,
        notice: `The cell ${what} and was interrupted; the ${label} kernel kept its variables (the cell's own work may be incomplete).`,
      };
    }
    if (result?.status === 'error') {
      const unavailable = KernelUnavailableError.fromResult(result) !== undefined;
      return {
        isError: true,
        toldReset: false,
        ...(unavailable && c.language !== 'python' ? { notice: 'Python cells are not affected.' } : {}),
      };
    }
    return { isError: false, toldReset: false };
  }
}

function text(message: string, isError: boolean): KernelToolResult {
  return { content: [{ type: 'text', text: message }], isError };
}

function seconds(ms: number): string {
  const s = ms / 1000;
  return `${Number.isInteger(s) ? s : Number(s.toFixed(3))}s`;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
