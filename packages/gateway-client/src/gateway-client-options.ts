import { lazy } from '@kernelwarden/core';
import { defaultWebSocketClass, type WebSocketClass } from './default-websocket.js';
import { parseOptions } from './validation.js';
import { zod } from './zod.js';

export type { WebSocketClass };

/**
 * Told which kernels this process created and deleted, so an embedded gateway can clean up after a process that
 * died (`LocalGateway` tickets provide one).
 */
export interface KernelOwnership {
  /** Called after each successful create, with the new kernel's id. */
  created(id: string): void;
  /** Called after each confirmed delete (2xx, 404 or 410). */
  deleted(id: string): void;
  /**
   * Called before a create that asks for kernel id `id` is sent: from then on a kernel may exist under it, even if
   * this process dies before the answer. `created` (the server honoured the id) or `notCreated` follows.
   */
  creating?(id: string): void;
  /** The create that asked for `id` made no kernel under it: refused, or the server named its kernel otherwise. */
  notCreated?(id: string): void;
}

/** What a gateway's diagnostics say about the resource limits of one kernel (its cgroups), when they know. */
export interface KernelLimitReading {
  /** Processes of the kernel killed for memory so far (over every launch of the kernel). */
  oomKills: number;
  /** The kernel's memory limit, when it has one. */
  memoryLimitBytes?: number | undefined;
}

/**
 * What a gateway on this machine can tell about one of its kernels beyond REST (`LocalGateway` tickets provide it).
 * `GatewayKernel.start()` uses it to notice at once that a starting kernel's process exited, and to say why.
 */
export interface KernelDiagnostics {
  /** False when no process of the kernel runs; true when one does; undefined when it cannot tell. */
  processAlive(kernelId: string): boolean | undefined;
  /** The last lines of stderr written since the kernel started (oldest first; empty when unknown), never the token. */
  stderrTail(kernelId: string): string[];
  /**
   * The kernel's resource-limit counters (its cgroups), when the gateway enforces limits on it; undefined when it has
   * none. `GatewayKernel` compares readings to name a kernel killed for memory (`KernelDiedError` reason `'oom'`).
   * `@kernelwarden/isolation`'s `kernelLimitEvents` answers it.
   */
  limitEvents?(kernelId: string): KernelLimitReading | undefined;
}

/**
 * Kernels a gateway on this machine started ahead of demand (`LocalGateway` tickets provide one): `GatewayKernel.start()`
 * claims one of the kernelspec it wants instead of creating a kernel, and applies `cwd`, `env` and the prelude to it.
 */
export interface KernelPool {
  /**
   * Claims a ready kernel of `kernelName` for this process — atomically: no other process gets the same one — and
   * records this process as its owner. Undefined when none is ready (the caller creates one instead).
   */
  claim(kernelName: string): string | undefined;
}

/**
 * The processes of a gateway's kernels, when the gateway runs on this machine (`LocalGateway` tickets provide it).
 * `GatewayKernel.kill()` uses it to kill a kernel at once instead of asking the server for a graceful restart.
 */
export interface KernelProcesses {
  /** Kills every process of kernel `kernelId` (SIGKILL) and says whether any was found. */
  kill(kernelId: string): boolean;
}

/** What a `request` transport answers: the HTTP status and the body's text. */
export interface GatewayAnswer {
  readonly status: number;
  text(): Promise<string>;
}

/**
 * A REST transport lighter than `fetch`, for a gateway on this machine: a `LocalGateway` ticket gives one over
 * `node:http`, which spares a short-lived process the ~20 ms Node takes to load its `fetch` (undici) on first use.
 * When given, `GatewayClient` sends every request through it instead of `fetch`. It must reject when `init.signal`
 * aborts, and when the gateway cannot be reached. `init.maxResponseBytes` is the client's body limit: a transport
 * should stop reading (and reject) past it; the client refuses a longer text either way, and bounds the wait for it
 * by the request's deadline and signal.
 */
export type GatewayRequest = (
  url: string,
  init: {
    method: string;
    headers: Record<string, string>;
    body?: string;
    signal: AbortSignal;
    maxResponseBytes?: number;
  },
) => Promise<GatewayAnswer>;

/** The deadline of each REST request when `requestTimeoutMs` is not given: 10 s. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;

/**
 * The largest REST body read when `maxResponseBytes` is not given: 8 MiB, counted after decompression. A kernel list
 * of tens of thousands of kernels fits; a gzip bomb or an endless body stops there.
 */
export const DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024;

/**
 * What kind of server the gateway is. `'jupyter'`: jupyter-server, Jupyter Kernel Gateway or the embedded gateway
 * (kernels start in seconds on the server's machine). `'enterprise-gateway'`: Jupyter Enterprise Gateway, which
 * launches each kernel remotely (a Kubernetes pod, a YARN application, a Docker container); its creates answer only
 * once the kernel runs, so starts get a longer default deadline (`DEFAULT_REMOTE_STARTUP_TIMEOUT_MS`).
 */
export type GatewayFlavor = 'jupyter' | 'enterprise-gateway';

/** The gateway flavour when `flavor` is not given. */
export const DEFAULT_GATEWAY_FLAVOR: GatewayFlavor = 'jupyter';

/** Options of `new GatewayClient()`. */
export interface GatewayClientOptions {
  /** The server's base URL, e.g. `http://127.0.0.1:8888` (a base path is kept). */
  baseUrl: string;
  /** Sent as `Authorization: token …`; never printed. */
  token?: string;
  /** The fetch to use. @defaultValue globalThis.fetch (looked up at each call, so test hooks apply) */
  fetch?: typeof fetch;
  /** A lighter REST transport than `fetch`, used instead of it when given (a `LocalGateway` ticket has one). */
  request?: GatewayRequest;
  /**
   * The WebSocket class for kernel channels.
   * @defaultValue `DefaultWebSocket`: the `ws` package's WebSocket, loaded when the first socket opens
   */
  WebSocket?: WebSocketClass;
  /**
   * Deadline of each REST request, the reading of its body included; `0` disables it.
   * @defaultValue {@link DEFAULT_REQUEST_TIMEOUT_MS}
   */
  requestTimeoutMs?: number;
  /**
   * The largest body a REST answer may have, in bytes after decompression; a longer one fails the call with
   * `GatewayResponseTooLargeError`. @defaultValue {@link DEFAULT_MAX_RESPONSE_BYTES}
   */
  maxResponseBytes?: number;
  /** Told about every kernel this client creates or deletes. */
  ownership?: KernelOwnership;
  /** Process and stderr diagnostics of the gateway's kernels, when it runs on this machine. */
  diagnostics?: KernelDiagnostics;
  /** Kernels the gateway started ahead of demand, for `GatewayKernel.start()` to claim. */
  pool?: KernelPool;
  /** The gateway's kernel processes, for an immediate `GatewayKernel.kill()`. */
  processes?: KernelProcesses;
  /**
   * The gateway starts kernels in turn from a fair queue (the embedded gateway's start queue; a `LocalGateway` ticket
   * says so): the time a create waits for its turn does not count toward a start's `startupTimeoutMs` and is
   * bounded by `timeoutMs` instead (the gateway answers `GatewayBusyError` past it).
   */
  startQueue?: StartQueue;
  /** What kind of server the gateway is. @defaultValue {@link DEFAULT_GATEWAY_FLAVOR} */
  flavor?: GatewayFlavor;
  /**
   * Sent as `KERNEL_USERNAME` with every create (unless the create's `env` names one): Enterprise Gateway's user of
   * the kernel (its per-user limit, the kernel pod's name and namespace); other servers ignore it.
   * @defaultValue the OS user this process runs as
   */
  kernelUsername?: string;
  /**
   * `GatewayKernel.start()` sends its `POST /api/kernels` through the create guard, a small detached process that
   * deletes the start's kernel should this process exit before the start returned it (see the README's "Nothing is
   * left behind"). It sends the request over its own `node:http`, so it cannot be combined with `fetch` or `request`.
   * @defaultValue true, unless `fetch`, `request` or `ownership` is given (a `LocalGateway` ticket's server drops a
   * create whose requester is gone by itself)
   */
  createGuard?: boolean;
}

/** A gateway's start queue, as `GatewayClientOptions.startQueue` describes it. */
export interface StartQueue {
  /** The longest a create waits for its turn, in milliseconds. */
  timeoutMs: number;
}

/** `GatewayClientOptions` validated, with every default applied. */
export interface ResolvedGatewayClientOptions {
  /** The base URL without a trailing slash. */
  readonly baseUrl: string;
  /** The token, or undefined when none (an empty string counts as none). */
  readonly token: string | undefined;
  /** The fetch given, or undefined: `globalThis.fetch` is then looked up at each call. */
  readonly fetch: typeof fetch | undefined;
  /** The lighter transport given, if any; it is used instead of `fetch`. */
  readonly request: GatewayRequest | undefined;
  readonly WebSocket: WebSocketClass;
  readonly requestTimeoutMs: number;
  readonly maxResponseBytes: number;
  readonly ownership: KernelOwnership | undefined;
  readonly diagnostics: KernelDiagnostics | undefined;
  readonly pool: KernelPool | undefined;
  readonly processes: KernelProcesses | undefined;
  readonly startQueue: StartQueue | undefined;
  readonly flavor: GatewayFlavor;
  /** The `kernelUsername` given, or undefined: the OS user is then looked up at the first create. */
  readonly kernelUsername: string | undefined;
  /** Whether starts send their creates through the create guard. */
  readonly createGuard: boolean;
}

const hasFunctions =
  <T>(...names: (keyof T & string)[]) =>
  (v: unknown): v is T =>
    typeof v === 'object' && v !== null && names.every((n) => typeof (v as Record<string, unknown>)[n] === 'function');

const optionsSchema = lazy(() => {
  const { z } = zod();
  return z
    .object({
      baseUrl: z
        .string()
        .refine((s) => URL.canParse(s) && /^https?:$/.test(new URL(s).protocol), 'must be an http(s) URL'),
      token: z.string().optional(),
      fetch: z.custom<typeof fetch>((v) => typeof v === 'function', 'must be a function').optional(),
      request: z.custom<GatewayRequest>((v) => typeof v === 'function', 'must be a function').optional(),
      WebSocket: z.custom<WebSocketClass>((v) => typeof v === 'function', 'must be a WebSocket class').optional(),
      requestTimeoutMs: z.number().finite().min(0).optional(),
      maxResponseBytes: z.number().int().positive().optional(),
      ownership: z
        .custom<KernelOwnership>(
          hasFunctions<KernelOwnership>('created', 'deleted'),
          'must have created(id) and deleted(id) functions',
        )
        .optional(),
      diagnostics: z
        .custom<KernelDiagnostics>(
          hasFunctions<KernelDiagnostics>('processAlive', 'stderrTail'),
          'must have processAlive(id) and stderrTail(id) functions',
        )
        .optional(),
      pool: z
        .custom<KernelPool>(hasFunctions<KernelPool>('claim'), 'must have a claim(kernelName) function')
        .optional(),
      processes: z
        .custom<KernelProcesses>(hasFunctions<KernelProcesses>('kill'), 'must have a kill(kernelId) function')
        .optional(),
      startQueue: z.object({ timeoutMs: z.number().finite().min(0) }).optional(),
      flavor: z.enum(['jupyter', 'enterprise-gateway']).optional(),
      kernelUsername: z
        .string()
        .min(1)
        .max(4096)
        .refine((s) => !/[$`\r\n\0]/.test(s), 'must not hold $, a backtick, CR, LF or NUL')
        .optional(),
      createGuard: z.boolean().optional(),
    })
    .refine((o) => !(o.createGuard === true && (o.fetch !== undefined || o.request !== undefined)), {
      message: 'cannot be true with fetch or request: the create guard sends the create over its own HTTP',
      path: ['createGuard'],
    });
});

/**
 * Validates `GatewayClient` options and applies their defaults; throws `InvalidOptionsError` naming the bad field
 * (`baseUrl`, `requestTimeoutMs`, `maxResponseBytes`).
 *
 * `new GatewayClient()` calls it; call it yourself to check options from configuration before use.
 */
export function resolveGatewayClientOptions(options: GatewayClientOptions): ResolvedGatewayClientOptions {
  const opts = parseOptions(optionsSchema(), options, 'GatewayClient options');
  return Object.freeze({
    baseUrl: opts.baseUrl.replace(/\/+$/, ''),
    token: opts.token || undefined,
    fetch: opts.fetch,
    request: opts.request,
    WebSocket: opts.WebSocket ?? defaultWebSocketClass,
    requestTimeoutMs: opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
    maxResponseBytes: opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
    ownership: opts.ownership,
    diagnostics: opts.diagnostics,
    pool: opts.pool,
    processes: opts.processes,
    startQueue: opts.startQueue ? Object.freeze({ timeoutMs: opts.startQueue.timeoutMs }) : undefined,
    flavor: opts.flavor ?? DEFAULT_GATEWAY_FLAVOR,
    kernelUsername: opts.kernelUsername,
    createGuard:
      opts.createGuard ?? (opts.fetch === undefined && opts.request === undefined && opts.ownership === undefined),
  });
}
