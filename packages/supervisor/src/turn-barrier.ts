import { onAbort } from '@kernelwarden/core';
/**
 * A first-come, first-served async mutex: one turn at a time.
 *
 * `KernelSession` runs every execution and lifecycle step (start, stop, setEnv, restart) inside it, so at most one
 * of them talks to the session's kernels at once. Internal to the package.
 */
export class TurnBarrier {
  #held = false;
  readonly #queue: { grant: () => void; cancel: (reason: unknown) => void }[] = [];

  /** True while a turn holds the barrier. */
  get busy(): boolean {
    return this.#held;
  }

  /** How many turns wait for the barrier. */
  get waiting(): number {
    return this.#queue.length;
  }

  /**
   * Waits for the barrier and resolves with its release function (idempotent). Rejects with `signal.reason` if
   * the signal aborts while waiting; the place in the queue is given up.
   */
  enter(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (!this.#held) {
      this.#held = true;
      return Promise.resolve(this.#releaser());
    }
    return new Promise((resolve, reject) => {
      const entry = {
        grant: () => {
          unlisten?.();
          resolve(this.#releaser());
        },
        cancel: reject,
      };
      this.#queue.push(entry);
      // Through core's relay: a signal shared by many sessions carries one listener, not one per waiter.
      const unlisten = signal
        ? onAbort(signal, () => {
            const index = this.#queue.indexOf(entry);
            if (index >= 0) this.#queue.splice(index, 1);
            reject(signal.reason);
          })
        : undefined;
    });
  }

  #releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#queue.shift();
      if (next) next.grant();
      else this.#held = false;
    };
  }
}
