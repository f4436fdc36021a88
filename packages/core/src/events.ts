/** Removes a listener added with `on()`. Calling it again does nothing. */
export type Unsubscribe = () => void;

/** A listener of events of type `E`. */
export type Listener<E> = (event: E) => void;

/**
 * The event map of a union of events told apart by their `type` field: `{ published: …; ended: … }`.
 *
 * Use it to give a `TypedEmitter` events that carry their own `type`.
 */
export type EventMapOf<E extends { type: string }> = { [T in E['type']]: Extract<E, { type: T }> };

/**
 * A minimal typed event emitter: listeners per event name, called synchronously in the order they were added.
 *
 * A listener that throws is isolated: its error is dropped and the other listeners still run, so an observer can
 * never break the bookkeeping that emitted the event. Every package that emits events uses this one.
 */
export class TypedEmitter<M extends object> {
  readonly #listeners = new Map<keyof M, Set<Listener<never>>>();

  /** Calls `listener` for every event named `type`; returns the function that removes it. */
  on<K extends keyof M>(type: K, listener: Listener<M[K]>): Unsubscribe {
    let set = this.#listeners.get(type);
    if (!set) this.#listeners.set(type, (set = new Set()));
    set.add(listener);
    return () => this.off(type, listener);
  }

  /** Removes `listener` from the event named `type`; does nothing when it was not added. */
  off<K extends keyof M>(type: K, listener: Listener<M[K]>): void {
    this.#listeners.get(type)?.delete(listener);
  }

  /** Delivers `event` to the listeners of `type`, in the order they were added. */
  emit<K extends keyof M>(type: K, event: M[K]): void {
    const set = this.#listeners.get(type);
    if (!set) return;
    for (const listener of [...set]) {
      try {
        (listener as Listener<M[K]>)(event);
      } catch {
        // An observer's failure must not break the state change that emitted the event.
      }
    }
  }
}
