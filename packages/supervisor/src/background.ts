import type { ExecuteResult, Output } from '@kernelwarden/core';
import { BackgroundCellError, messageOf, NoKernelError } from './errors.js';
import type { SupervisedKernel } from './lease.js';

/** What `KernelSession.peekBackground()` says about a background cell. */
export interface BackgroundPeek {
  execId: string;
  /** `'running'`, `'done'` (finished ok), `'failed'` (the cell raised or its kernel failed) or `'interrupted'`. */
  status: 'running' | 'done' | 'failed' | 'interrupted';
  /** True once the cell finished, one way or another. */
  done: boolean;
  /** Stream text written to stdout so far (the last `maxPeekChars` characters). */
  stdout: string;
  /** Stream text written to stderr so far (the last `maxPeekChars` characters). */
  stderr: string;
  /** `null`, or what went wrong: `"<ename>: <evalue>"` for a cell error, the message of a kernel failure. */
  error: string | null;
  /** The cell's result, once it finished with one. */
  result?: ExecuteResult;
  /** The text was cut to the last `maxPeekChars` characters. */
  truncated: boolean;
}

interface Job {
  execId: string;
  code: string;
  controller: AbortController;
  kernel?: SupervisedKernel;
  peek: BackgroundPeek;
  promise: Promise<BackgroundPeek>;
}

/** Internal: background cells, each on its own kernel, shut down when the cell ends. */
export class BackgroundCells {
  readonly #jobs = new Map<string, Job>();
  readonly #maxActive: number;
  readonly #maxPeekChars: number;
  readonly #maxKept: number;
  #active = 0;

  constructor(opts: { maxActive: number; maxPeekChars: number; maxKept?: number }) {
    this.#maxActive = opts.maxActive;
    this.#maxPeekChars = opts.maxPeekChars;
    this.#maxKept = opts.maxKept ?? 256;
  }

  get running(): number {
    return this.#active;
  }

  start(
    code: string,
    build: (signal: AbortSignal) => Promise<SupervisedKernel>,
    opts: { cellId?: string; origin?: string },
  ): { execId: string } {
    if (this.#active >= this.#maxActive) {
      throw new BackgroundCellError(
        `Too many background cells are running (${this.#maxActive}); wait for one to finish`,
        'BACKGROUND_LIMIT',
      );
    }
    const execId = `exec-${globalThis.crypto.randomUUID().replaceAll('-', '').slice(0, 12)}`;
    const job: Job = {
      execId,
      code,
      controller: new AbortController(),
      peek: { execId, status: 'running', done: false, stdout: '', stderr: '', error: null, truncated: false },
      promise: undefined as unknown as Promise<BackgroundPeek>,
    };
    this.#active += 1;
    this.#jobs.set(execId, job);
    this.#evict();
    job.promise = this.#run(job, build, opts);
    return { execId };
  }

  peek(execId: string): BackgroundPeek {
    return { ...this.#job(execId).peek };
  }

  async wait(execId: string): Promise<BackgroundPeek> {
    await this.#job(execId).promise;
    return this.peek(execId);
  }

  async interrupt(execId: string): Promise<boolean> {
    const job = this.#job(execId);
    if (job.peek.done) return false;
    job.controller.abort(new Error('background cell interrupted'));
    try {
      await job.kernel?.interrupt();
    } catch {
      // Best effort: the abort above already settles the execution.
    }
    return true;
  }

  /** Interrupts every running cell and waits until every background kernel is shut down. */
  async closeAll(): Promise<void> {
    const jobs = [...this.#jobs.values()].filter((job) => !job.peek.done);
    await Promise.all(jobs.map((job) => this.interrupt(job.execId).catch(() => false)));
    await Promise.allSettled(jobs.map((job) => job.promise));
  }

  #job(execId: string): Job {
    const job = this.#jobs.get(execId);
    if (!job) throw new BackgroundCellError(`No background cell with id "${execId}"`, 'BACKGROUND_NOT_FOUND');
    return job;
  }

  #append(job: Job, stream: 'stdout' | 'stderr', text: string): void {
    let next = job.peek[stream] + text;
    if (next.length > this.#maxPeekChars) {
      next = next.slice(next.length - this.#maxPeekChars);
      job.peek.truncated = true;
    }
    job.peek[stream] = next;
  }

  async #run(
    job: Job,
    build: (signal: AbortSignal) => Promise<SupervisedKernel>,
    opts: { cellId?: string; origin?: string },
  ): Promise<BackgroundPeek> {
    const signal = job.controller.signal;
    let kernel: SupervisedKernel | undefined;
    let streamed = false;
    try {
      kernel = await build(signal);
      job.kernel = kernel;
      signal.throwIfAborted();
      if (typeof kernel.execute !== 'function') throw new NoKernelError('background', 'kernel has no execute()');
      const onOutput = (output: Output) => {
        if (output.type !== 'stream') return;
        streamed = true;
        this.#append(job, output.name, output.text);
      };
      const result = await kernel.execute(job.code, {
        signal,
        onOutput,
        ...(opts.cellId !== undefined ? { cellId: opts.cellId } : {}),
        ...(opts.origin !== undefined ? { origin: opts.origin } : {}),
      });
      if (!streamed) {
        this.#append(job, 'stdout', result.stdout);
        this.#append(job, 'stderr', result.stderr);
      }
      job.peek.result = result;
      job.peek.error = result.error ? `${result.error.ename}: ${result.error.evalue}` : null;
      job.peek.status = result.cancelled
        ? 'interrupted'
        : result.status === 'ok'
          ? 'done'
          : result.error
            ? 'failed'
            : 'interrupted';
    } catch (error) {
      job.peek.error = messageOf(signal.aborted ? signal.reason : error);
      job.peek.status = signal.aborted ? 'interrupted' : 'failed';
    } finally {
      if (kernel) {
        try {
          await kernel.shutdown();
        } catch {
          // shutdown() never throws by contract; a custom kernel that does must not break the job.
        }
      }
      job.peek.done = true;
      this.#active -= 1;
    }
    return job.peek;
  }

  #evict(): void {
    if (this.#jobs.size <= this.#maxKept) return;
    for (const [id, job] of this.#jobs) {
      if (this.#jobs.size <= this.#maxKept) break;
      if (job.peek.done) this.#jobs.delete(id);
    }
  }
}
