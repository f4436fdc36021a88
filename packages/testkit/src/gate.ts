/**
 * A one-shot barrier that tests open by hand: `wait()` resolves once `open()` was called, `reset()` closes it again.
 *
 * Use it to hold code under test at a known point (an execution, a factory) and to learn that it got there.
 */
export class Gate {
  #open: boolean;
  readonly #waiters = new Set<() => void>();

  /** @param open whether the gate starts open. @defaultValue false */
  constructor(open = false) {
    this.#open = open;
  }

  /** True between `open()` and the next `reset()`. */
  get isOpen(): boolean {
    return this.#open;
  }

  /** Opens the gate: every current and future `wait()` resolves until `reset()`. */
  open(): void {
    this.#open = true;
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const resolve of waiters) resolve();
  }

  /** Closes the gate again; waiters that already resolved stay resolved. */
  reset(): void {
    this.#open = false;
  }

  /** Resolves when the gate is open; rejects with `signal.reason` if the signal aborts first. */
  wait(signal?: AbortSignal): Promise<void> {
    if (this.#open) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        this.#waiters.delete(done);
        reject(signal?.reason);
      };
      const done = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      this.#waiters.add(done);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** How many `wait()` calls are pending. */
  get waiting(): number {
    return this.#waiters.size;
  }
}
