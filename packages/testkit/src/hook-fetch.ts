/** One recorded `fetch` call. */
export interface FetchCall {
  /** The request URL as a string. */
  url: string;
  /** The HTTP method, upper-case. @defaultValue 'GET' */
  method: string;
  /** The `init` argument as given. */
  init: RequestInit | undefined;
  /** The first argument as given (a string, URL or Request). */
  input: string | URL | Request;
}

/** Answers a hooked `fetch` call; `original` is the `fetch` that was installed before the hook, for pass-through. */
export type FetchHandler = (
  input: string | URL | Request,
  init: RequestInit | undefined,
  original: typeof fetch,
) => Response | Promise<Response>;

/** What `hookFetch()` returns: the recorded calls, and disposal that restores the previous `fetch`. */
export interface FetchHook extends Disposable {
  /** Every call made while the hook was installed, in call order. */
  readonly calls: FetchCall[];
  /** Puts the previous `globalThis.fetch` back; idempotent (same as disposing). */
  restore(): void;
}

/**
 * Replaces `globalThis.fetch` with `handler` and records every call, until the returned hook is disposed.
 *
 * Use it as `using hook = hookFetch((input, init) => new Response('{}'))` to stage HTTP answers without a server.
 */
export function hookFetch(handler: FetchHandler): FetchHook {
  const original = globalThis.fetch;
  const calls: FetchCall[] = [];
  const hooked = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const isRequest = typeof Request !== 'undefined' && input instanceof Request;
    const url = isRequest ? input.url : String(input);
    const method = (init?.method ?? (isRequest ? input.method : 'GET')).toUpperCase();
    calls.push({ url, method, init, input });
    return handler(input, init, original);
  };
  globalThis.fetch = hooked as typeof fetch;
  let restored = false;
  const restore = () => {
    if (restored) return;
    restored = true;
    if (globalThis.fetch === (hooked as typeof fetch)) globalThis.fetch = original;
  };
  return { calls, restore, [Symbol.dispose]: restore };
}
