/** Stops a listener added with `on()`. Calling it again does nothing. */
export type Unsubscribe = () => void;

/**
 * A minimal typed event emitter: listeners per event `type`, called synchronously in the order they were added.
 *
 * A listener that throws is isolated: its error is dropped and the other listeners still run, so an observer can
 * never break the bookkeeping that emitted the event.
 */
export class TypedEmitter<E extends { type: string }> {
  readonly #listeners = new Map<string, Set<(event: any) => void>>();

  /** Calls `listener` for every event of `type`; returns the function that removes it. */
  on<T extends E['type']>(type: T, listener: (event: Extract<E, { type: T }>) => void): Unsubscribe {
    let set = this.#listeners.get(type);
    if (!set) this.#listeners.set(type, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
    };
  }

  /** Delivers `event` to its listeners. */
  emit(event: E): void {
    const set = this.#listeners.get(event.type);
    if (!set) return;
    for (const listener of [...set]) {
      try {
        listener(event);
      } catch {
        // An observer's failure must not break the state change that emitted the event.
      }
    }
  }
}
