import { randomBytes } from 'node:crypto';
import type { Output } from '@kernelwarden/core';
import { CellTranscript, type KernelToolResult } from './cell-transcript.js';
import type { ResolvedKernelToolOptions } from './tool-options.js';

/** A language the tools run: each has its own kernel in the session, in the supervisor slot of that name. */
export type KernelLanguage = 'python' | 'r';

/** Why a cell was stopped: its timeout ran out, or a client cancelled it. */
export type StopReason = 'timeout' | 'cancel';

/**
 * One `run_code` cell, from the call that started it to its result, which may come in several answers: the
 * output since the last answer each time it is asked for while the cell runs (`partial()`), then the final
 * result once it has ended (`final`).
 */
export class CellRun {
  /** The id a model follows it with (`cell-…`), distinct from background cells' `exec-…`. */
  readonly id = `cell-${randomBytes(4).toString('hex')}`;
  readonly language: KernelLanguage;
  /** The cells that held the session when this one was sent: it runs after them. */
  readonly ahead: readonly CellRun[];
  readonly startedAt: number;
  readonly settled: Promise<void>;
  /** True once an answer was given while it ran: the model knows its id. */
  yielded = false;
  stoppedBy: StopReason | undefined;
  /** The lease of its language's kernel when it was stopped (a different one afterwards means a reset). */
  leaseWhenStopped: string | undefined;

  readonly #options: ResolvedKernelToolOptions;
  readonly #controller = new AbortController();
  readonly #listeners = new Set<(output: Output) => void>();
  #segment: CellTranscript;
  #final: KernelToolResult | undefined;
  #settle!: () => void;

  constructor(language: KernelLanguage, ahead: readonly CellRun[], options: ResolvedKernelToolOptions) {
    this.language = language;
    this.ahead = ahead;
    this.#options = options;
    this.#segment = new CellTranscript(options);
    this.startedAt = options.clock.now();
    this.settled = new Promise((resolve) => {
      this.#settle = resolve;
    });
  }

  /** Aborted when the cell is stopped (timeout or cancel): the session's executor interrupts it. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** The final result, once the cell has ended. */
  get final(): KernelToolResult | undefined {
    return this.#final;
  }

  /** True while a cell that was sent before this one has not ended: this one has not started. */
  get queued(): boolean {
    return this.ahead.some((run) => run.final === undefined);
  }

  readonly onOutput = (output: Output): void => {
    this.#segment.onOutput(output);
    for (const listener of this.#listeners) listener(output);
  };

  /** Feeds the cell's outputs from now on to `listener` too (a waiting call's progress); returns the detach. */
  listen(listener: (output: Output) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Stops the cell: its signal aborts with `reason`. Only the first stop counts. */
  stop(why: StopReason, reason: unknown, lease: string | undefined): void {
    if (this.#controller.signal.aborted || this.#final) return;
    this.stoppedBy = why;
    this.leaseWhenStopped = lease;
    this.#controller.abort(reason);
  }

  /** The answer while it runs: the output since the last answer, then `notice`; the next answer starts after it. */
  partial(notice: string): KernelToolResult {
    const segment = this.#segment;
    this.#segment = new CellTranscript(this.#options);
    this.yielded = true;
    return {
      ...segment.finish({ isError: false, notice }),
      structuredContent: { exec_id: this.id, status: 'running' },
    };
  }

  /** Ends the cell with its final result: the output since the last answer, the result's own error, the notices. */
  finish(opts: {
    addResult?: (transcript: CellTranscript) => void;
    isError: boolean;
    notice?: string | undefined;
    preface?: string | undefined;
  }): void {
    opts.addResult?.(this.#segment);
    this.#final = this.#segment.finish(opts);
    this.#listeners.clear();
    this.#settle();
  }

  /** Resolves once the cell has ended, `ms` have passed (`Infinity`: never) or `signal` aborts; true if it ended. */
  async wait(ms: number, signal?: AbortSignal): Promise<boolean> {
    if (this.#final) return true;
    if (ms <= 0 || signal?.aborted) return false;
    let timer: { cancel(): void } | undefined;
    let onAbort: (() => void) | undefined;
    const gaveUp = new Promise<void>((resolve) => {
      if (Number.isFinite(ms) && ms <= MAX_TIMER_MS) timer = this.#options.clock.setTimer(resolve, ms);
      onAbort = resolve;
      signal?.addEventListener('abort', onAbort, { once: true });
    });
    try {
      await Promise.race([this.settled, gaveUp]);
    } finally {
      timer?.cancel();
      if (onAbort) signal?.removeEventListener('abort', onAbort);
    }
    return this.#final !== undefined;
  }
}

/** Node's timers cannot wait longer (they would fire at once); a longer wait is no limit. */
export const MAX_TIMER_MS = 2_147_483_647;
