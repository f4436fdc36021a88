/**
 * The callbacks waiting on each signal, behind one listener of ours per signal: a signal shared by hundreds of
 * operations (a session's, a lease holder's) carries one `abort` listener, not one per operation, so Node never warns
 * of a listener leak (`MaxListenersExceededWarning`, past 10). The listener goes when the last callback does.
 */
interface Relay {
  callbacks: Set<() => void>;
  listener: () => void;
}

const relays = new WeakMap<AbortSignal, Relay>();

/**
 * Calls `callback` once when `signal` aborts; returns the function that cancels it (idempotent). However many
 * callbacks wait on one signal, the signal carries a single listener of ours, removed once none waits. An aborted
 * signal does not call it: check `signal.aborted` first.
 */
export function onAbort(signal: AbortSignal, callback: () => void): () => void {
  let relay = relays.get(signal);
  if (!relay) {
    const callbacks = new Set<() => void>();
    const listener = () => {
      relays.delete(signal);
      for (const entry of [...callbacks]) entry();
      callbacks.clear();
    };
    relay = { callbacks, listener };
    relays.set(signal, relay);
    signal.addEventListener('abort', listener, { once: true });
  }
  const { callbacks, listener } = relay;
  const entry = () => {
    callbacks.delete(entry);
    callback();
  };
  callbacks.add(entry);
  return () => {
    if (!callbacks.delete(entry) || callbacks.size > 0) return;
    if (relays.get(signal)?.callbacks === callbacks) relays.delete(signal);
    signal.removeEventListener('abort', listener);
  };
}

/** How many callbacks wait on `signal` through `onAbort` (for tests and diagnostics). */
export function abortCallbacks(signal: AbortSignal): number {
  return relays.get(signal)?.callbacks.size ?? 0;
}
