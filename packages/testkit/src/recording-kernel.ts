import {
  abortScope,
  type Clock,
  type ExecuteOptions,
  type ExecuteResult,
  emptyResult,
  type KernelHandle,
  KernelwardenError,
  type KillOutcome,
  systemClock,
} from '@kernelwarden/core';
import { Gate } from './gate.js';

/**
 * A `RecordingKernel` could not run a cell: it was not alive (`KERNEL_NOT_ALIVE`) or was killed while the cell
 * ran (`KERNEL_KILLED`).
 *
 * Expect it in tests that execute on a dead or killed fake kernel; a real kernel fails the same way.
 */
export class RecordingKernelError extends KernelwardenError {
  static override readonly brand: string = 'RecordingKernelError';
  constructor(message: string, code: 'KERNEL_NOT_ALIVE' | 'KERNEL_KILLED') {
    super(message, { code });
  }
}

/** A scripted cell body: returns (or throws) what the kernel answers for `code`. */
export type RecordingKernelScript = (
  code: string,
  opts: ExecuteOptions & { cellId: string },
  kernel: RecordingKernel,
) => ExecuteResult | Promise<ExecuteResult>;

/** Options of `new RecordingKernel(name, opts)`. */
export interface RecordingKernelOptions {
  /** The event list to append to; pass one array to several kernels to record their interleaving. @defaultValue a new array */
  events?: string[];
  /** The kernel's `id`. @defaultValue `<name>-<n>`, unique in the process */
  id?: string;
  /** When true, every execution waits for `executeRelease` before it answers. @defaultValue false */
  hold?: boolean;
  /** When true, `interrupt()` opens `executeRelease`. @defaultValue false */
  releaseOnInterrupt?: boolean;
  /**
   * When true, `kill()` behaves like a Jupyter server's kill, which is a restart: the kernel stays alive with fresh
   * state and `kill()` resolves `{ restarted: true }`. Off, a kill leaves it dead and resolves
   * `{ restarted: false }`. @defaultValue false
   */
  killRestarts?: boolean;
  /** Answers each execution instead of the default ok result; may await gates or throw (a broken kernel). */
  execute?: RecordingKernelScript;
  /** The clock that measures `ExecuteOptions.timeoutMs`. @defaultValue systemClock */
  clock?: Clock;
}

let kernelCounter = 0;
let cellCounter = 0;

/**
 * The result a `RecordingKernel` gives by default: `status: 'ok'`, no output, nothing cancelled.
 *
 * Use it to build results in `execute` scripts: `{ ...okResult('c1'), stdout: 'hi\n' }`.
 */
export function okResult(cellId: string): ExecuteResult {
  return emptyResult(cellId);
}

/**
 * A `KernelHandle` that runs no code: it records every call as `<name>:execute-enter`, `:execute-exit`,
 * `:interrupt`, `:kill`, `:restart`, `:shutdown` in `events`, counts calls, and holds executions open on gates.
 *
 * Use it to test code that drives kernels (supervisors, watchdogs, sessions) and assert the order of what it did.
 */
export class RecordingKernel implements KernelHandle {
  /** The name used as the prefix of every recorded event. */
  readonly name: string;
  /** The kernel id (`opts.id`, or `<name>-<n>`). */
  readonly id: string;
  /** Every recorded event, in order (shared when passed in the options). */
  readonly events: string[];
  /** Whether executions wait for `executeRelease`; may be changed at any time. */
  hold: boolean;
  /** Whether `interrupt()` opens `executeRelease`; may be changed at any time. */
  releaseOnInterrupt: boolean;
  /** Whether `kill()` leaves the kernel alive with fresh state (a Jupyter server's kill); may be changed at any time. */
  killRestarts: boolean;
  /** What `isAlive()` returns; `kill()`/`shutdown()` clear it, `restart()` sets it. Tests may set it directly. */
  live = true;
  /** How many times `execute()` was called (dead-kernel calls included). */
  executeCalls = 0;
  /** How many times `interrupt()` was called. */
  interruptCalls = 0;
  /** How many times `kill()` was called. */
  killCalls = 0;
  /** How many times `restart()` was called. */
  restartCalls = 0;
  /** How many times `shutdown()` was called. */
  shutdownCalls = 0;
  /** Every `execute()` call's code and options, in call order. */
  readonly executions: { code: string; opts: ExecuteOptions }[] = [];
  /** Opened when an execution starts (stays open until `reset()`). */
  readonly executeEntered = new Gate();
  /** Held executions (and scripts that wait on it) continue once it opens. */
  readonly executeRelease = new Gate();
  /** The simulated interpreter state for scripts: cleared by `restart()` and `kill()`. */
  readonly state = new Map<string, unknown>();

  readonly #script: RecordingKernelScript | undefined;
  readonly #clock: Clock;
  readonly #inFlight = new Set<() => void>();

  constructor(name: string, opts: RecordingKernelOptions = {}) {
    this.name = name;
    this.id = opts.id ?? `${name}-${++kernelCounter}`;
    this.events = opts.events ?? [];
    this.hold = opts.hold ?? false;
    this.releaseOnInterrupt = opts.releaseOnInterrupt ?? false;
    this.killRestarts = opts.killRestarts ?? false;
    this.#script = opts.execute;
    this.#clock = opts.clock ?? systemClock;
  }

  /** Returns `live`. */
  isAlive(): boolean {
    return this.live;
  }

  /**
   * Records the call, opens `executeEntered`, waits for `executeRelease` when `hold` is set, then answers with the
   * script's result or `okResult(cellId)`. Aborting `signal` or running out of `timeoutMs` resolves at once with
   * `status: 'aborted'`, `cancelled: true` (and `timedOut`); `shutdown()` settles it the same way. Rejects with
   * `RecordingKernelError` when the kernel is not alive or is killed while the cell is held.
   */
  async execute(code: string, opts: ExecuteOptions = {}): Promise<ExecuteResult> {
    this.executeCalls++;
    this.executions.push({ code, opts });
    if (!this.live) throw new RecordingKernelError(`Kernel ${this.name} is not alive`, 'KERNEL_NOT_ALIVE');
    const cellId = opts.cellId ?? `cell-${++cellCounter}`;
    const killsAtStart = this.killCalls;
    this.events.push(`${this.name}:execute-enter`);
    this.executeEntered.open();
    const scope = abortScope({ signal: opts.signal, timeoutMs: opts.timeoutMs, clock: this.#clock });
    let settleByShutdown: () => void = () => {};
    const shutdown = new Promise<ExecuteResult>((resolve) => {
      settleByShutdown = () => resolve(emptyResult(cellId, { status: 'aborted', cancelled: true }));
    });
    this.#inFlight.add(settleByShutdown);
    try {
      const work = (async () => {
        if (this.hold) await this.executeRelease.wait();
        if (this.killCalls !== killsAtStart) {
          throw new RecordingKernelError(`Kernel ${this.name} was killed while executing`, 'KERNEL_KILLED');
        }
        if (!this.#script) return okResult(cellId);
        return await this.#script(code, { ...opts, cellId, signal: scope.signal }, this);
      })();
      return await scope.race(Promise.race([work, shutdown]));
    } catch (error) {
      if (scope.signal.aborted && error === scope.signal.reason) {
        return emptyResult(cellId, { status: 'aborted', cancelled: true, timedOut: scope.timedOut });
      }
      throw error;
    } finally {
      scope.dispose();
      this.#inFlight.delete(settleByShutdown);
      this.events.push(`${this.name}:execute-exit`);
    }
  }

  /** Records `:interrupt`; opens `executeRelease` when `releaseOnInterrupt` is set. Delivered while alive. */
  async interrupt(_opts: { signal?: AbortSignal } = {}): Promise<{ delivered: boolean }> {
    this.interruptCalls++;
    this.events.push(`${this.name}:interrupt`);
    if (this.releaseOnInterrupt) this.executeRelease.open();
    return { delivered: this.live };
  }

  /**
   * Records `:kill`, clears `state` and opens `executeRelease` (the held cell then fails). Sets `live` false and
   * resolves `{ restarted: false }`, or with `killRestarts` keeps it alive and resolves `{ restarted: true }`.
   */
  async kill(_opts: { signal?: AbortSignal } = {}): Promise<KillOutcome | void> {
    this.killCalls++;
    this.events.push(`${this.name}:kill`);
    this.live = this.killRestarts;
    this.state.clear();
    this.executeRelease.open();
    return { restarted: this.killRestarts };
  }

  /** Records `:restart`, clears `state` and sets `live` true: same handle, fresh interpreter. */
  async restart(_opts: { signal?: AbortSignal } = {}): Promise<void> {
    this.restartCalls++;
    this.events.push(`${this.name}:restart`);
    this.state.clear();
    this.live = true;
  }

  /** Records `:shutdown`, sets `live` false, settles executions in flight as cancelled; always confirmed. */
  async shutdown(_opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<{ confirmed: boolean }> {
    this.shutdownCalls++;
    this.events.push(`${this.name}:shutdown`);
    this.live = false;
    for (const settle of [...this.#inFlight]) settle();
    return { confirmed: true };
  }
}
