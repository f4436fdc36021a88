import { DeadlineExceededError, KernelwardenError } from '@kernelwarden/core';

/**
 * The gateway could not be reached: connection refused, DNS failure, reset, or a WebSocket that would not open.
 *
 * Thrown by every REST call and by channel connects; retryable, since the server may come back.
 */
export class GatewayUnavailableError extends KernelwardenError {
  static override readonly brand: string = 'GatewayUnavailableError';
  /** The gateway's base URL (never with a token). */
  readonly url: string;

  constructor(message: string, options: { url: string; cause?: unknown }) {
    super(message, { code: 'GATEWAY_UNAVAILABLE', cause: options.cause, retryable: true });
    this.url = options.url;
  }
}

/**
 * The gateway refused our credentials (HTTP 401 or 403, on REST or on the WebSocket upgrade).
 *
 * Check the token given to `GatewayClient`; not retryable.
 */
export class GatewayAuthError extends KernelwardenError {
  static override readonly brand: string = 'GatewayAuthError';
  /** The HTTP status the gateway answered with. */
  readonly status: number;
  /** The gateway's base URL (never with a token). */
  readonly url: string;

  constructor(message: string, options: { status: number; url: string; cause?: unknown }) {
    super(message, { code: 'GATEWAY_AUTH', cause: options.cause });
    this.status = options.status;
    this.url = options.url;
  }
}

/**
 * A REST call answered with an unexpected HTTP status (anything but auth failures, which are `GatewayAuthError`).
 *
 * Carries `status`; retryable for 5xx answers.
 */
export class GatewayRequestError extends KernelwardenError {
  static override readonly brand: string = 'GatewayRequestError';
  /** The HTTP status the gateway answered with. */
  readonly status: number;
  /** The request's method and path, e.g. `POST /api/kernels/abc/interrupt`. */
  readonly request: string;

  constructor(message: string, options: { status: number; request: string; cause?: unknown }) {
    super(message, { code: 'GATEWAY_HTTP', cause: options.cause, retryable: options.status >= 500 });
    this.status = options.status;
    this.request = options.request;
  }
}

/**
 * A kernel could not be created or initialised: the create request failed (`status` is its HTTP status), or the
 * environment step or prelude raised.
 *
 * Thrown by `GatewayKernel.start()` and `GatewayClient.createKernel()`.
 */
export class KernelStartError extends KernelwardenError {
  static override readonly brand: string = 'KernelStartError';
  /** The HTTP status of the failed create, when the failure was an HTTP answer. */
  readonly status: number | undefined;

  constructor(message: string, options: { status?: number; cause?: unknown; retryable?: boolean; code?: string } = {}) {
    super(message, {
      code: options.code ?? 'KERNEL_START',
      cause: options.cause,
      retryable: options.retryable ?? (options.status !== undefined && options.status >= 500),
    });
    this.status = options.status;
  }
}

/**
 * The gateway has no room for another kernel: it runs as many as it allows (the embedded gateway's `maxKernels`,
 * answered with HTTP 503 and reason `at-capacity` once the start waited its bound). Nothing was left running.
 *
 * Thrown by `GatewayKernel.start()` and `GatewayClient.createKernel()`; retryable once a kernel was shut down.
 * A `KernelStartError` (code `GATEWAY_CAPACITY`), so handlers of failed starts see it too.
 */
export class GatewayCapacityError extends KernelStartError {
  static override readonly brand: string = 'GatewayCapacityError';
  /** How many kernels the gateway allows at once, when it said. */
  readonly maxKernels: number | undefined;

  constructor(message: string, options: { status?: number; maxKernels?: number; cause?: unknown } = {}) {
    super(message, { code: 'GATEWAY_CAPACITY', status: options.status, cause: options.cause, retryable: true });
    this.maxKernels = options.maxKernels;
  }
}

/**
 * A start waited its whole deadline for a kernel: the gateway was busy starting others (its start queue, or a stock
 * server that did not answer the create in time). Its `name` is `'TimeoutError'`, as for every deadline; nothing
 * was left running (a kernel the server created anyway is deleted as soon as it is known).
 *
 * Thrown by `GatewayKernel.start()`; retryable.
 */
export class GatewayBusyError extends DeadlineExceededError {
  static override readonly brand: string = 'GatewayBusyError';
  /** How long the start waited, in milliseconds, when known. */
  readonly waitedMs: number | undefined;

  constructor(message: string, options: { timeoutMs?: number; waitedMs?: number; cause?: unknown } = {}) {
    super(message, { code: 'GATEWAY_BUSY', timeoutMs: options.timeoutMs, cause: options.cause });
    this.waitedMs = options.waitedMs;
  }
}

/**
 * A variable of a create's `env` (the environment sent with `POST /api/kernels`, `launchEnv` of a start) that
 * Enterprise Gateway would refuse: a value longer than 4,096 characters or one holding `$`, a backtick, CR, LF or
 * NUL, a name that is empty or holds `=` or NUL, or a `KERNEL_ID` that is not the create's own id. Nothing was sent.
 *
 * `variable` names it; the value is never shown (it may be a secret). Not retryable.
 */
export class KernelEnvError extends KernelwardenError {
  static override readonly brand: string = 'KernelEnvError';
  /** The name of the refused variable (clipped to 80 characters). */
  readonly variable: string;

  constructor(message: string, options: { variable: string }) {
    super(message, { code: 'KERNEL_ENV' });
    this.variable = options.variable;
  }
}

/** Why a `KernelDiedError` was raised. */
/**
 * `'oom'`: killed for using more than its memory limit (the server restarted it; its variables are gone).
 */
export type KernelDeathReason = 'dead' | 'restarted' | 'oom' | 'gone' | 'connection-lost' | 'shutdown';

/**
 * The kernel stopped answering for good while work was pending: it died (and maybe was restarted by the server,
 * losing its state), vanished from the gateway, or its connection could not be re-established.
 *
 * Pending executions reject with it; `reason` says which. Retrying the cell on the same handle may work after a
 * `'restarted'` death.
 */
export class KernelDiedError extends KernelwardenError {
  static override readonly brand: string = 'KernelDiedError';
  /** What happened to the kernel. */
  readonly reason: KernelDeathReason;
  /** The gateway's kernel id. */
  readonly kernelId: string;

  constructor(
    message: string,
    options: { reason: KernelDeathReason; kernelId: string; cause?: unknown; code?: string },
  ) {
    super(message, {
      code: options.code ?? 'KERNEL_DIED',
      cause: options.cause,
      retryable: options.reason === 'restarted' || options.reason === 'oom',
    });
    this.reason = options.reason;
    this.kernelId = options.kernelId;
  }
}

/**
 * The gateway a kernel ran on stopped answering (a `GatewaySet`'s health check found it down): the kernel's pending
 * executions reject with it within seconds instead of waiting for sockets that may never close, and the handle is
 * dead. `url` names the gateway. A `KernelDiedError` (reason `'connection-lost'`, code `GATEWAY_DOWN`), so whoever
 * replaces dead kernels (a `KernelSupervisor`) replaces this one — on another gateway of the set.
 */
export class GatewayDownError extends KernelDiedError {
  static override readonly brand: string = 'GatewayDownError';
  /** The base URL of the gateway that went down (never with a token). */
  readonly url: string;

  constructor(message: string, options: { url: string; kernelId: string; cause?: unknown }) {
    super(message, {
      reason: 'connection-lost',
      kernelId: options.kernelId,
      cause: options.cause,
      code: 'GATEWAY_DOWN',
    });
    this.url = options.url;
  }
}

/**
 * The gateway sent something that breaks the Jupyter protocol: a malformed frame (wrong framing, a part of the wrong
 * shape, too many buffers, more than `maxFrameBytes`), a message that could not be handled, or a REST body of the
 * wrong shape.
 *
 * On a channel it is reported as a `protocol-error` event and the message is dropped (a cell it names settles with
 * status `'error'`, `error.ename` `'KernelProtocolError'`); from REST calls it is thrown.
 */
export class ProtocolError extends KernelwardenError {
  static override readonly brand: string = 'ProtocolError';
  /** The `msg_id` of the dropped message's `parent_header`, when it could be read: the request it answered. */
  readonly parentMsgId: string | undefined;

  constructor(message: string, options: { cause?: unknown; parentMsgId?: string } = {}) {
    super(message, { code: 'PROTOCOL', cause: options.cause });
    this.parentMsgId = options.parentMsgId;
  }
}

/**
 * A REST answer's body was larger than `maxResponseBytes` (counted after decompression): the client stopped reading
 * it and dropped what it had read.
 *
 * Thrown by every REST call; `url` names the gateway, `request` the call, `limitBytes` the limit. Not retryable: a
 * gateway that sends such a body is broken or hostile.
 */
export class GatewayResponseTooLargeError extends KernelwardenError {
  static override readonly brand: string = 'GatewayResponseTooLargeError';
  /** The gateway's base URL (never with a token). */
  readonly url: string;
  /** The request's method and path, e.g. `GET /api/kernels`. */
  readonly request: string;
  /** The limit the body went past, in bytes. */
  readonly limitBytes: number;

  constructor(message: string, options: { url: string; request: string; limitBytes: number }) {
    super(message, { code: 'GATEWAY_RESPONSE_TOO_LARGE' });
    this.url = options.url;
    this.request = options.request;
    this.limitBytes = options.limitBytes;
  }
}

/**
 * A kernel id that is not a plain id (letters, digits, `-` and `_`, at most 128 characters): `.`, `..`, a slash or
 * anything else that would change the meaning of a URL path it goes into.
 *
 * Thrown by `GatewayClient`'s kernel methods before anything is sent; an id of that kind in a gateway's answer is a
 * `ProtocolError`. `kernelId` is the id, JSON-quoted and clipped.
 */
export class InvalidKernelIdError extends KernelwardenError {
  static override readonly brand: string = 'InvalidKernelIdError';
  /** The refused id as JSON, clipped to 80 characters. */
  readonly kernelId: string;

  constructor(message: string, options: { kernelId: string }) {
    super(message, { code: 'INVALID_KERNEL_ID' });
    this.kernelId = options.kernelId;
  }
}
