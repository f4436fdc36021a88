// The gateway's REST transport: one request under a deadline and a signal, its body read whole up to a cap, the
// answer's status checked, its JSON parsed and validated.
import { type AbortScope, abortScope, effectiveTimeout, isTimeoutError } from '@kernelwarden/core';
import type { z } from 'zod/v3';
import {
  GatewayAuthError,
  GatewayRequestError,
  GatewayResponseTooLargeError,
  GatewayUnavailableError,
  ProtocolError,
} from './errors.js';
import { describeCause, resourceLimitAnswer, summarizeErrorBody } from './gateway-answers.js';
import type { GatewayRequest } from './gateway-client-options.js';

/** Options every REST call accepts. */
export interface RequestOptions {
  /** Aborts the request; the call rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Overrides the client's `requestTimeoutMs` for this call; `0` disables it. */
  timeoutMs?: number;
}

/** What a request is sent with: one gateway's address, token, transport and limits. */
export interface TransportConfig {
  readonly baseUrl: string;
  readonly token: string | undefined;
  readonly fetch: typeof fetch | undefined;
  readonly transport: GatewayRequest | undefined;
  readonly requestTimeoutMs: number;
  readonly maxResponseBytes: number;
}

/** A request's options as `sendRequest` takes them. */
export type SendOptions = RequestOptions & {
  body?: unknown;
  capacity403?: boolean;
  transport?: GatewayRequest | undefined;
};

/**
 * Sends one request and reads its whole body, both under the request's deadline and signal, the body capped at
 * `maxResponseBytes` (counted after decompression). A 401/403 throws `GatewayAuthError` (not a 403 that is
 * Enterprise Gateway's capacity answer, with `capacity403`); a non-2xx status outside `accept` throws
 * `GatewayRequestError`.
 */
export async function sendRequest(
  config: TransportConfig,
  method: string,
  path: string,
  opts: SendOptions,
  accept: number[] | 'any' = [],
): Promise<Answer> {
  const label = `${method} ${path}`;
  const timeoutMs = effectiveTimeout(opts.timeoutMs ?? config.requestTimeoutMs);
  const scope = abortScope({
    signal: opts.signal,
    timeoutMs,
    timeoutMessage: `Gateway at ${config.baseUrl} did not answer ${label} within ${timeoutMs} ms`,
  });
  try {
    scope.throwIfAborted();
    const res = await exchange(config, method, path, opts, scope);
    const capacity = opts.capacity403 === true && res.status === 403 && resourceLimitAnswer(res.body) !== undefined;
    if ((res.status === 401 || res.status === 403) && !capacity) {
      throw new GatewayAuthError(
        `Gateway at ${config.baseUrl} refused the token (${res.status}) on ${label}: check the token given to GatewayClient`,
        { status: res.status, url: config.baseUrl },
      );
    }
    if (accept !== 'any' && !res.ok && !accept.includes(res.status)) {
      const detail = errorDetail(res, config.token);
      throw new GatewayRequestError(`Gateway at ${config.baseUrl} answered ${label} with HTTP ${res.status}${detail}`, {
        status: res.status,
        request: label,
      });
    }
    return res;
  } finally {
    scope.dispose();
  }
}

/** Sends the request through the configured transport (or fetch) and reads the answer whole, within `scope`. */
async function exchange(
  config: TransportConfig,
  method: string,
  path: string,
  opts: SendOptions,
  scope: AbortScope,
): Promise<Answer> {
  const label = `${method} ${path}`;
  const headers: Record<string, string> = {};
  if (config.token) headers.Authorization = `token ${config.token}`;
  if (opts.body !== undefined) headers['Content-Type'] = 'application/json';
  const url = `${config.baseUrl}${path}`;
  const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
  const limit = config.maxResponseBytes;
  const tooLarge = () =>
    new GatewayResponseTooLargeError(
      `Gateway at ${config.baseUrl} answered ${label} with a body larger than ${limit} bytes (maxResponseBytes); it was not read further`,
      { url: config.baseUrl, request: label, limitBytes: limit },
    );
  const transport = opts.transport ?? config.transport;
  try {
    if (transport) {
      const init = { method, headers, ...(body === undefined ? {} : { body }), signal: scope.signal };
      const answer = await scope.race(transport(url, { ...init, maxResponseBytes: limit }));
      const text = await scope.race(answer.text());
      // A transport that ignores maxResponseBytes has read it all: it is still not handed on.
      if (text.length > limit || Buffer.byteLength(text) > limit) throw tooLarge();
      return { status: answer.status, ok: answer.status >= 200 && answer.status < 300, body: text };
    }
    const response = await scope.race(
      (config.fetch ?? globalThis.fetch)(url, { method, headers, body, signal: scope.signal }),
    );
    return { status: response.status, ok: response.ok, body: await readCapped(response, limit, scope, tooLarge) };
  } catch (error) {
    if (scope.signal.aborted) throw scope.signal.reason;
    if (isTimeoutError(error) || GatewayResponseTooLargeError.isInstance(error)) throw error;
    throw new GatewayUnavailableError(
      `Gateway at ${config.baseUrl} is unreachable (${describeCause(error)}) on ${label}: check that the server is running and the URL is right`,
      { url: config.baseUrl, cause: error },
    );
  }
}

/** `: <summary>` of an error answer's body, clipped and with the token hidden; empty for an empty body. */
function errorDetail(res: Answer, token: string | undefined): string {
  const text = summarizeErrorBody(res.body.trim());
  if (!text) return '';
  const clipped = text.length > 300 ? `${text.slice(0, 300)}…` : text;
  return `: ${redactToken(clipped, token)}`;
}

/** `text` with every occurrence of the token replaced by `<token>`. */
export function redactToken(text: string, token: string | undefined): string {
  return token ? text.split(token).join('<token>') : text;
}

/** The answer's body as JSON; a body that is not JSON throws `ProtocolError`. */
export function answerJson(baseUrl: string, res: Answer, label: string): unknown {
  try {
    return JSON.parse(res.body) as unknown;
  } catch (cause) {
    throw new ProtocolError(`Gateway at ${baseUrl} answered ${label} with a body that is not JSON`, { cause });
  }
}

/** `body` validated by `schema`; one of another shape throws `ProtocolError` naming the first bad field. */
export function parseAnswer<S extends z.ZodType>(
  baseUrl: string,
  schema: S,
  body: unknown,
  label: string,
): z.output<S> {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const where = issue?.path.length ? ` at "${issue.path.join('.')}"` : '';
  throw new ProtocolError(
    `Gateway at ${baseUrl} answered ${label} with an unexpected body${where}: ${issue?.message ?? 'invalid'}`,
    { cause: parsed.error },
  );
}

/** An answer `sendRequest` read whole. */
export interface Answer {
  readonly status: number;
  readonly ok: boolean;
  /** The body as text (empty when there was none). */
  readonly body: string;
}

/**
 * A fetch response's body as text, read chunk by chunk: past `limit` bytes (after fetch's decompression) the read
 * stops and `tooLarge()` is thrown; the scope's deadline or abort stops it too. The stream is cancelled either way.
 */
export async function readCapped(
  response: Response,
  limit: number,
  scope: AbortScope,
  tooLarge: () => Error,
): Promise<string> {
  const stream = response.body;
  if (!stream) return '';
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await scope.race(reader.read());
      if (done) break;
      total += value.byteLength;
      if (total > limit) throw tooLarge();
      text += decoder.decode(value, { stream: true });
    }
    return text + decoder.decode();
  } catch (error) {
    reader.cancel().catch(() => {});
    throw error;
  }
}
