import { GatewayAuthError, GatewayUnavailableError } from './errors.js';

/** The error inside a WebSocket `error` event (`ws` puts it on `error`, WHATWG sockets only a `message`). */
export function errorOf(event: unknown): unknown {
  const inner = (event as { error?: unknown } | undefined)?.error;
  if (inner !== undefined) return inner;
  const message = (event as { message?: unknown } | undefined)?.message;
  if (typeof message === 'string') return new Error(message);
  return event;
}

/**
 * What a failed channels connect becomes: `GatewayAuthError` for a 401/403 upgrade answer (never naming the token),
 * else `GatewayUnavailableError` naming the HTTP status or the socket's own error; the original is the `cause`.
 */
export function connectError(cause: unknown, where: string): Error {
  const text = cause instanceof Error ? cause.message : String(cause);
  const status = /Unexpected server response: (\d+)/.exec(text)?.[1];
  if (status === '401' || status === '403') {
    return new GatewayAuthError(
      `Gateway refused the token (${status}) when opening the channels WebSocket of ${where}: check the token`,
      { status: Number(status), url: where, cause },
    );
  }
  const reason = status ? `HTTP ${status}` : text;
  return new GatewayUnavailableError(`Could not open the channels WebSocket of ${where} (${reason})`, {
    url: where,
    cause,
  });
}
