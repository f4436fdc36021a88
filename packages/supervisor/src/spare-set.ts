import { KernelwardenError, onAbort } from '@kernelwarden/core';
import { ClosedError, KernelFactoryError } from './errors.js';
import { isAlive, type SupervisedKernel } from './lease.js';
import type { KernelFactory } from './slot-supervisor.js';

/** Options of `KernelSupervisor.configureSpares()`. */
export interface SparesOptions<K extends SupervisedKernel> {
  /** How many ready kernels to keep. `0` removes the set. */
  size: number;
  /**
   * Runs on each spare kernel once it is started, before it counts as ready (a session's bootstrap). A kernel whose
   * `prepare` throws is shut down and the refill pauses until the next hand-over or `configureSpares`.
   */
  prepare?: (kernel: K, ctx: { slot: string; key: string; signal: AbortSignal }) => void | Promise<void>;
}

/** What `KernelSupervisor.sparesStatus()` says about one spares. */
export interface SparesStatus {
  /** Kernels started, prepared and waiting. */
  ready: number;
  /** A refill is running. */
  filling: boolean;
  /** The size the set keeps. */
  size: number;
  /** The error that paused refilling, until the next hand-over. */
  lastError?: KernelwardenError;
}

interface SpareSetInit<K extends SupervisedKernel> extends SparesOptions<K> {
  slot: string;
  key: string;
  factory: KernelFactory<K>;
  shutdown: (kernel: K) => Promise<void>;
  track: (work: Promise<unknown>) => void;
}

/**
 * Started, prepared spare kernels for one slot and key, refilled one at a time in the background.
 * Internal to the supervisor: `KernelSupervisor.configureSpares()` creates them.
 */
export class SpareSet<K extends SupervisedKernel> {
  readonly slot: string;
  readonly key: string;
  readonly #init: SpareSetInit<K>;
  readonly #ready: K[] = [];
  readonly #controller = new AbortController();
  #filling = false;
  #closed = false;
  #lastError: KernelwardenError | undefined;
  readonly #watchers = new Set<() => void>();

  constructor(init: SpareSetInit<K>) {
    this.#init = init;
    this.slot = init.slot;
    this.key = init.key;
  }

  /** Hands over a ready, live kernel (or `undefined`), and starts a refill. */
  take(): K | undefined {
    let taken: K | undefined;
    while (!taken && this.#ready.length > 0) {
      const kernel = this.#ready.shift()!;
      if (isAlive(kernel)) taken = kernel;
      else this.#init.track(this.#init.shutdown(kernel));
    }
    this.#lastError = undefined;
    this.fill();
    return taken;
  }

  /** Starts building kernels until `size` are ready, unless a refill already runs or the last one failed. */
  fill(): void {
    if (this.#filling || this.#closed || this.#lastError !== undefined) return;
    if (this.#ready.length >= this.#init.size) return;
    this.#filling = true;
    this.#init.track(this.#refill());
  }

  /** Stops refilling and shuts down every ready kernel; a kernel still being built is shut down when it arrives. */
  async drain(): Promise<void> {
    this.#closed = true;
    this.#controller.abort(new Error('the spares were drained'));
    this.#notify();
    await Promise.all(this.#ready.splice(0).map((kernel) => this.#init.shutdown(kernel)));
  }

  /** Resolves once `size` kernels are ready; rejects with the refill's error when it failed, or when drained. */
  async ready(signal?: AbortSignal): Promise<void> {
    for (;;) {
      signal?.throwIfAborted();
      if (this.#lastError !== undefined) throw this.#lastError;
      if (this.#closed) throw new ClosedError('spares');
      if (this.#ready.length >= this.#init.size) return;
      await new Promise<void>((resolve, reject) => {
        const wake = () => {
          unlisten?.();
          resolve();
        };
        this.#watchers.add(wake);
        const unlisten = signal
          ? onAbort(signal, () => {
              this.#watchers.delete(wake);
              reject(signal.reason);
            })
          : undefined;
      });
    }
  }

  #notify(): void {
    const watchers = [...this.#watchers];
    this.#watchers.clear();
    for (const wake of watchers) wake();
  }

  status(): SparesStatus {
    const status: SparesStatus = {
      ready: this.#ready.length,
      filling: this.#filling,
      size: this.#init.size,
    };
    if (this.#lastError !== undefined) status.lastError = this.#lastError;
    return status;
  }

  async #refill(): Promise<void> {
    const { slot, key, factory, prepare, shutdown } = this.#init;
    const signal = this.#controller.signal;
    try {
      while (!this.#closed && this.#ready.length < this.#init.size) {
        const kernel = await factory({ slot, key, purpose: 'spare', signal });
        try {
          if (this.#closed) break;
          if (!isAlive(kernel)) throw new KernelFactoryError(slot, key, 'the factory returned a dead kernel');
          await prepare?.(kernel, { slot, key, signal });
          if (this.#closed || !isAlive(kernel)) break;
          this.#ready.push(kernel);
          this.#notify();
        } finally {
          if (!this.#ready.includes(kernel)) await shutdown(kernel);
        }
      }
    } catch (error) {
      if (!this.#closed) {
        this.#lastError = KernelwardenError.isInstance(error)
          ? error
          : new KernelFactoryError(slot, key, error instanceof Error ? error.message : 'spare refill failed', error);
      }
    } finally {
      this.#filling = false;
      this.#notify();
    }
  }
}
