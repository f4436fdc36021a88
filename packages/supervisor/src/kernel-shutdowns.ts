import type { Clock } from '@kernelwarden/core';
import type { SupervisedKernel } from './lease.js';

/** Delays before each retry of an unconfirmed kernel shutdown. */
const SHUTDOWN_RETRY_DELAYS_MS = [500, 2000, 5000];

/**
 * The supervisor's promise that every kernel a factory handed over is shut down exactly once per hand-over, whoever
 * asks (replacement, stop, expiry, spares, a cancelled build), and that an unconfirmed shutdown is tried again in the
 * background. It also tracks the background work (builds, refills, shutdowns) that `settled()` waits for.
 *
 * Internal to the supervisor.
 */
export class KernelShutdowns<K extends SupervisedKernel> {
  readonly #clock: Clock;
  readonly #timeoutMs: number | undefined;
  readonly #pending = new Set<Promise<unknown>>();
  /** How many times a factory handed each kernel over: a handle published again is a new one to shut down. */
  readonly #handOvers = new WeakMap<object, number>();
  /** The hand-over of each kernel that was shut down (or is being shut down). */
  readonly #shutDown = new WeakMap<object, number>();

  constructor(clock: Clock, timeoutMs: number | undefined) {
    this.#clock = clock;
    this.#timeoutMs = timeoutMs;
  }

  /** Records that a factory handed `kernel` over: from then on it is a kernel to shut down, even one shut down earlier. */
  handOver(kernel: K): K {
    if (typeof kernel === 'object' && kernel !== null)
      this.#handOvers.set(kernel, (this.#handOvers.get(kernel) ?? 0) + 1);
    return kernel;
  }

  /**
   * Shuts a kernel down exactly once per hand-over; never throws. A handle that a factory hands over again after it
   * was shut down (a cached connection, revived) is shut down again when its turn comes.
   */
  shutdown(kernel: K): Promise<void> {
    const handOver = this.#handOvers.get(kernel) ?? 0;
    if (this.#shutDown.get(kernel) === handOver) return Promise.resolve();
    this.#shutDown.set(kernel, handOver);
    let call: Promise<unknown>;
    try {
      call = Promise.resolve(kernel.shutdown(this.#shutdownOptions()));
    } catch {
      call = Promise.resolve();
    }
    const done = call.then(
      (outcome) => {
        if (isUnconfirmed(outcome)) this.track(this.#retry(kernel, handOver, 0));
      },
      () => undefined,
    );
    this.track(done);
    return done;
  }

  /** Counts `promise` as background work until it settles. */
  track(promise: Promise<unknown>): void {
    const settled = promise.then(
      () => undefined,
      () => undefined,
    );
    this.#pending.add(settled);
    void settled.then(() => this.#pending.delete(settled));
  }

  /** True while tracked work is still running. */
  get busy(): boolean {
    return this.#pending.size > 0;
  }

  /** Settles once the work tracked so far has settled. */
  async allSettled(): Promise<void> {
    await Promise.allSettled([...this.#pending]);
  }

  #shutdownOptions(): { timeoutMs: number } | undefined {
    return this.#timeoutMs === undefined ? undefined : { timeoutMs: this.#timeoutMs };
  }

  /**
   * A shutdown that came back `{ confirmed: false }` (a DELETE refused while the server auto-restarts the kernel, a
   * gateway that timed out) is tried again in the background, so the kernel is not left running on the server.
   */
  async #retry(kernel: K, handOver: number, attempt: number): Promise<void> {
    const delay = SHUTDOWN_RETRY_DELAYS_MS[attempt];
    if (delay === undefined) return;
    await new Promise<void>((resolve) => this.#clock.setTimer(resolve, delay));
    // Handed over again meanwhile: it is in use, and its next shutdown is another one's business.
    if (this.#handOvers.get(kernel) !== handOver) return;
    let outcome: unknown;
    try {
      outcome = await kernel.shutdown(this.#shutdownOptions());
    } catch {
      return;
    }
    if (isUnconfirmed(outcome)) await this.#retry(kernel, handOver, attempt + 1);
  }
}

function isUnconfirmed(outcome: unknown): boolean {
  return typeof outcome === 'object' && outcome !== null && (outcome as { confirmed?: unknown }).confirmed === false;
}
