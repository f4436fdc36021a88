import { randomUUID } from 'node:crypto';
import { type AbortScope, abortScope, effectiveTimeout, isTimeoutError, lazy } from '@kernelwarden/core';
import type { z } from 'zod/v3';
import { isWsClass } from './default-websocket.js';
import {
  GatewayAuthError,
  GatewayBusyError,
  GatewayCapacityError,
  GatewayRequestError,
  GatewayResponseTooLargeError,
  GatewayUnavailableError,
  InvalidKernelIdError,
  KernelStartError,
  ProtocolError,
} from './errors.js';
import {
  DEFAULT_MAX_RESPONSE_BYTES,
  DEFAULT_REQUEST_TIMEOUT_MS,
  type GatewayAnswer,
  type GatewayClientOptions,
  type GatewayFlavor,
  type GatewayRequest,
  type KernelDiagnostics,
  type KernelOwnership,
  type KernelPool,
  type KernelProcesses,
  resolveGatewayClientOptions,
  type StartQueue,
  type WebSocketClass,
} from './gateway-client-options.js';
import { checkedKernelId, KERNEL_ID_PATTERN } from './kernel-id.js';
import {
  type KernelJournalPage,
  type KernelJournalQuery,
  kernelJournalPageSchema,
  kernelJournalSearch,
} from './kernel-journal.js';
import { createEnv, defaultKernelUsername, isUuidV4 } from './launch-env.js';
import { zod } from './zod.js';

export type {
  GatewayAnswer,
  GatewayClientOptions,
  GatewayFlavor,
  GatewayRequest,
  KernelDiagnostics,
  KernelOwnership,
  KernelPool,
  KernelProcesses,
  StartQueue,
  WebSocketClass,
};

/** Marks a `GatewaySet` (and anything else that routes kernels over several gateways). @internal */
export const ROUTER: unique symbol = Symbol.for('kernelwarden.GatewayRouter') as never;

/** What `GatewayClient` needs of a `GatewaySet` it is built on. @internal */
export interface GatewayRouter {
  readonly [ROUTER]: true;
  /** Names every gateway, for messages. */
  readonly label: string;
  readonly gateways: readonly GatewayClient[];
  placeKernel(request: { kernelName: string }, exclude?: ReadonlySet<GatewayClient>): Promise<GatewayClient>;
  settled(
    client: GatewayClient,
    outcome: {
      kernel?: { readonly id: string; isAlive(): boolean; gatewayDown(cause?: unknown): void };
      unreachable?: Error;
    },
  ): void;
  clientFor(kernelId: string): GatewayClient | undefined;
  placed(
    client: GatewayClient,
    kernel: string | { readonly id: string; isAlive(): boolean; gatewayDown(cause?: unknown): void },
  ): void;
  forget(kernelId: string): void;
  healthyClients(): GatewayClient[];
}

function isRouter(value: unknown): value is GatewayRouter {
  return typeof value === 'object' && value !== null && (value as { [ROUTER]?: unknown })[ROUTER] === true;
}

/** A `GatewaySet` as `new GatewayClient()` accepts it. */
export type GatewaySetLike = GatewayRouter;

/** Options every REST call accepts. */
export interface RequestOptions {
  /** Aborts the request; the call rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Overrides the client's `requestTimeoutMs` for this call; `0` disables it. */
  timeoutMs?: number;
}

function kernelModelSchema(z: Zod) {
  return z
    .object({
      id: z.string().regex(KERNEL_ID_PATTERN, 'must be a kernel id: 1 to 128 letters, digits, "-" or "_"'),
      name: z.string(),
      last_activity: z.string().optional(),
      execution_state: z.string().optional(),
      connections: z.number().finite().optional(),
    })
    .passthrough();
}

/** A kernel as the gateway lists it. */
export type KernelModel = z.output<ReturnType<typeof kernelModelSchema>>;

function kernelSpecsSchema(z: Zod) {
  const kernelSpecModel = z
    .object({
      name: z.string(),
      spec: z
        .object({
          argv: z.array(z.string()),
          display_name: z.string(),
          language: z.string(),
          env: z.record(z.string(), z.string()).optional(),
          interrupt_mode: z.string().optional(),
          metadata: z.record(z.string(), z.unknown()).optional(),
        })
        .passthrough(),
      resources: z.record(z.string(), z.unknown()).optional(),
    })
    .passthrough();
  return {
    kernelSpecModel,
    kernelSpecsModel: z
      .object({
        default: z.string().nullable().optional(),
        kernelspecs: z.record(z.string(), kernelSpecModel),
      })
      .passthrough(),
  };
}

type Zod = typeof z;

/** The answers' schemas, built on the first request that needs one (importing this module does not load zod). */
const schemas = lazy(() => {
  const { z } = zod();
  const kernelModel = kernelModelSchema(z);
  return { kernelModel, kernelModels: z.array(kernelModel), ...kernelSpecsSchema(z) };
});

/** One kernelspec as `GET /api/kernelspecs` returns it. */
export type KernelSpecModel = z.output<ReturnType<typeof kernelSpecsSchema>['kernelSpecModel']>;
/** The answer of `GET /api/kernelspecs`. */
export type KernelSpecsModel = z.output<ReturnType<typeof kernelSpecsSchema>['kernelSpecsModel']>;

/**
 * A REST client for a Jupyter Server or Kernel Gateway: kernelspecs and the kernel lifecycle, each call with a
 * deadline and an `AbortSignal`.
 *
 * Create one per gateway and share it between kernels (`GatewayKernel.start({ gateway: client })`). Answers are
 * validated; a body of the wrong shape throws `ProtocolError`.
 */
export class GatewayClient {
  /** The base URL without a trailing slash. */
  readonly baseUrl: string;
  /** The WebSocket class kernels use for their channels. */
  readonly WebSocket: WebSocketClass;
  /** Told about created and deleted kernels, when given. */
  readonly ownership: KernelOwnership | undefined;
  /** The gateway's kernel diagnostics, when given (a gateway on this machine). */
  readonly diagnostics: KernelDiagnostics | undefined;
  /** Kernels the gateway started ahead of demand, when given (a gateway on this machine). */
  readonly pool: KernelPool | undefined;
  /** The gateway's kernel processes, when given (a gateway on this machine). */
  readonly processes: KernelProcesses | undefined;
  /** The gateway's start queue, when it has one (the embedded gateway). */
  readonly startQueue: StartQueue | undefined;
  /** What kind of server the gateway is (`'jupyter'` or `'enterprise-gateway'`). */
  readonly flavor: GatewayFlavor;
  /** Whether `GatewayKernel.start()` sends its creates through the create guard (the `createGuard` option). */
  readonly createGuard: boolean;
  readonly #kernelUsername: string | undefined;
  readonly #router: GatewayRouter | undefined;
  readonly #token: string | undefined;
  readonly #fetch: typeof fetch | undefined;
  readonly #transport: GatewayRequest | undefined;
  readonly #requestTimeoutMs: number;
  readonly #maxResponseBytes: number;

  /**
   * A client of one gateway (`options`), or of a `GatewaySet`: creates then go to the gateway the set places them on,
   * and each kernel's calls to the gateway that runs it; `listKernels()` lists every healthy gateway's kernels,
   * `kernelSpecs()` asks the first healthy one.
   */
  constructor(options: GatewayClientOptions | GatewaySetLike) {
    if (isRouter(options)) {
      const first = options.gateways[0] as GatewayClient;
      this.#router = options;
      this.baseUrl = options.label;
      this.#token = undefined;
      this.#fetch = undefined;
      this.#transport = undefined;
      this.WebSocket = first.WebSocket;
      this.#requestTimeoutMs = DEFAULT_REQUEST_TIMEOUT_MS;
      this.#maxResponseBytes = DEFAULT_MAX_RESPONSE_BYTES;
      this.ownership = undefined;
      this.diagnostics = undefined;
      this.pool = undefined;
      this.processes = undefined;
      this.startQueue = undefined;
      this.flavor = options.gateways.some((g) => g.flavor === 'enterprise-gateway') ? 'enterprise-gateway' : 'jupyter';
      this.#kernelUsername = undefined;
      this.createGuard = false;
      return;
    }
    const opts = resolveGatewayClientOptions(options);
    this.#router = undefined;
    this.baseUrl = opts.baseUrl;
    this.#token = opts.token;
    this.#fetch = opts.fetch;
    this.#transport = opts.request;
    this.WebSocket = opts.WebSocket;
    this.#requestTimeoutMs = opts.requestTimeoutMs;
    this.#maxResponseBytes = opts.maxResponseBytes;
    this.ownership = opts.ownership;
    this.diagnostics = opts.diagnostics;
    this.pool = opts.pool;
    this.processes = opts.processes;
    this.startQueue = opts.startQueue;
    this.flavor = opts.flavor;
    this.#kernelUsername = opts.kernelUsername;
    this.createGuard = opts.createGuard;
  }

  /** The `GatewaySet` this client routes over, when it was built on one. */
  get router(): GatewayRouter | undefined {
    return this.#router;
  }

  /** The client of the gateway running `kernelId` (a set's client asks its gateways when it did not place it). */
  async #owner(kernelId: string, opts: RequestOptions): Promise<GatewayClient | undefined> {
    const router = this.#router as GatewayRouter;
    const known = router.clientFor(kernelId);
    if (known) return known;
    for (const client of router.healthyClients()) {
      try {
        if (await client.getKernel(kernelId, opts)) {
          router.placed(client, kernelId);
          return client;
        }
      } catch (error) {
        if (opts.signal?.aborted) throw error;
      }
    }
    return undefined;
  }

  async #routed<T>(
    kernelId: string,
    opts: RequestOptions,
    call: (client: GatewayClient) => Promise<T>,
    label: string,
  ): Promise<T> {
    const owner = await this.#owner(checkedKernelId(kernelId, `GatewayClient.${label}`), opts);
    if (!owner) {
      throw new GatewayRequestError(`No gateway of the ${this.baseUrl} has kernel ${kernelId}`, {
        status: 404,
        request: `${label} ${kernelId}`,
      });
    }
    return call(owner);
  }

  /** Sent as `KERNEL_USERNAME` with every create that names none: the `kernelUsername` option, else the OS user. */
  get kernelUsername(): string {
    return this.#kernelUsername ?? defaultKernelUsername();
  }

  /** True when a token is configured (the token itself is never exposed by the client's API). */
  get hasToken(): boolean {
    return this.#token !== undefined;
  }

  /**
   * The WebSocket URL and connect headers for a kernel's channels (internal to this package; the URL carries the
   * token only for WebSocket classes that cannot send headers).
   * @internal
   */
  channelsTarget(kernelId: string, sessionId: string): { url: string; headers: Record<string, string> } {
    const owner = this.#router?.clientFor(kernelId);
    if (owner) return owner.channelsTarget(kernelId, sessionId);
    const ws = this.baseUrl.replace(/^http/, 'ws');
    const base = `${ws}/api/kernels/${checkedKernelId(kernelId, 'The channels socket')}/channels?session_id=${encodeURIComponent(sessionId)}`;
    if (!this.#token) return { url: base, headers: {} };
    if (isWsClass(this.WebSocket)) return { url: base, headers: { Authorization: `token ${this.#token}` } };
    return { url: `${base}&token=${encodeURIComponent(this.#token)}`, headers: {} };
  }

  /** Lists the kernelspecs the gateway can launch (`GET /api/kernelspecs`). */
  async kernelSpecs(opts: RequestOptions = {}): Promise<KernelSpecsModel> {
    if (this.#router) {
      const [first] = [...this.#router.healthyClients(), ...this.#router.gateways];
      return (first as GatewayClient).kernelSpecs(opts);
    }
    const res = await this.#request('GET', '/api/kernelspecs', opts);
    return this.#parse(schemas().kernelSpecsModel, this.#json(res, 'GET /api/kernelspecs'), 'GET /api/kernelspecs');
  }

  /** Lists the running kernels (`GET /api/kernels`). */
  async listKernels(opts: RequestOptions = {}): Promise<KernelModel[]> {
    if (this.#router) {
      const healthy = this.#router.healthyClients();
      const lists = await Promise.allSettled(healthy.map((c) => c.listKernels(opts)));
      const failed = lists.find((l): l is PromiseRejectedResult => l.status === 'rejected');
      if (failed && lists.every((l) => l.status === 'rejected')) throw failed.reason;
      return lists.flatMap((l) => (l.status === 'fulfilled' ? l.value : []));
    }
    const res = await this.#request('GET', '/api/kernels', opts);
    return this.#parse(schemas().kernelModels, this.#json(res, 'GET /api/kernels'), 'GET /api/kernels');
  }

  /** One kernel's model (`GET /api/kernels/{id}`), or `undefined` when the gateway does not know it (404). */
  async getKernel(id: string, opts: RequestOptions = {}): Promise<KernelModel | undefined> {
    if (this.#router) {
      const owner = await this.#owner(checkedKernelId(id, 'GatewayClient.getKernel'), opts);
      return owner?.getKernel(id, opts);
    }
    const path = `/api/kernels/${checkedKernelId(id, 'GatewayClient.getKernel')}`;
    const res = await this.#request('GET', path, opts, [404]);
    if (res.status === 404) return undefined;
    return this.#parse(schemas().kernelModel, this.#json(res, `GET ${path}`), `GET ${path}`);
  }

  /**
   * Starts a kernel (`POST /api/kernels`). A non-2xx answer throws `KernelStartError` with its `status`
   * (`GatewayCapacityError` when the gateway is at its kernel limit: the embedded gateway's 503 `at-capacity`,
   * Enterprise Gateway's 403 "Resource Limit" or max-kernels (per user) answer; `GatewayBusyError` when the embedded
   * gateway's start queue did not reach this create within `waitMs`, or Enterprise Gateway's launch outlived
   * `KERNEL_LAUNCH_TIMEOUT` (its HTTP 500 launch timeout)); `path` is the kernel's working directory relative to the
   * server's root.
   *
   * Every create has one id, a UUID v4: `kernelId` when given (it must be one), else a fresh one. It is sent as
   * `kernel_id` (honoured by jupyter-server 2.x and the embedded gateway; 1.x ignores it) and as `env.KERNEL_ID`
   * (honoured by Enterprise Gateway; the others ignore it), so the answer's `id` is that id wherever a server honours
   * either, and a create given up on can be deleted by it. `env` is sent with `KERNEL_ID`, `KERNEL_USERNAME` (the
   * client's `kernelUsername` unless `env` names one) and, with `launchTimeoutMs`, `KERNEL_LAUNCH_TIMEOUT` in whole
   * seconds; Kernel Gateway and Enterprise Gateway pass `KERNEL_*` variables (and those they allow) to the kernel's
   * launch, jupyter-server ignores them. Every variable is checked first against Enterprise Gateway's rules, whatever
   * the gateway: a value over 4,096 characters or holding `$`, a backtick, CR, LF or NUL, a bad name, or a
   * `KERNEL_ID` other than the create's id throws `KernelEnvError` naming the variable, and nothing is sent.
   *
   * `ownership.creating(id)` is told before the request is sent (a ticket records the id as this process's, so that a
   * process that dies while its create is in flight leaves the kernel to the gateway's orphan sweep), and
   * `ownership.notCreated(id)` when no kernel got that id. `waitMs` is how long the embedded gateway's start
   * queue may hold this create before answering 503 (other servers ignore it). `opts.transport` (internal) sends this
   * one request through another transport than the client's (the create guard's).
   */
  async createKernel(
    spec: {
      name: string;
      env?: Record<string, string>;
      path?: string;
      kernelId?: string;
      waitMs?: number;
      launchTimeoutMs?: number;
    },
    opts: RequestOptions & { /** @internal */ transport?: GatewayRequest } = {},
  ): Promise<KernelModel> {
    if (this.#router) return this.#createPlaced(this.#router, spec, opts);
    const subject = `Kernel create on gateway ${this.baseUrl}`;
    const chosen = spec.kernelId ?? spec.env?.KERNEL_ID ?? randomUUID();
    if (!isUuidV4(chosen)) {
      checkedKernelId(chosen, 'GatewayClient.createKernel');
      throw new InvalidKernelIdError(
        `GatewayClient.createKernel refused kernel id ${JSON.stringify(chosen).slice(0, 80)}: a create's id is a UUID v4 in lowercase (it is sent as kernel_id and KERNEL_ID)`,
        { kernelId: JSON.stringify(chosen).slice(0, 80) },
      );
    }
    const env = createEnv({
      env: spec.env,
      kernelId: chosen,
      username: spec.env?.KERNEL_USERNAME ?? this.kernelUsername,
      launchTimeoutMs: spec.launchTimeoutMs,
      subject,
    });
    const body: Record<string, unknown> = { name: spec.name };
    if (spec.path !== undefined) body.path = spec.path;
    body.env = env;
    body.kernel_id = chosen;
    this.ownership?.creating?.(chosen);
    if (spec.waitMs !== undefined) body.kernelwarden_wait_ms = Math.max(0, Math.floor(spec.waitMs));
    // Unanswered (a deadline, an abort, a lost connection): the chosen id's record stays, since the kernel may exist;
    // whoever gave up deletes it by that id.
    const res = await this.#request('POST', '/api/kernels', { ...opts, body, capacity403: true }, 'any');
    if (!res.ok) {
      this.ownership?.notCreated?.(chosen);
      throw this.#createRefused(res, spec.name);
    }
    const model = this.#parse(schemas().kernelModel, this.#json(res, 'POST /api/kernels'), 'POST /api/kernels');
    if (model.id !== chosen) this.ownership?.notCreated?.(chosen);
    this.ownership?.created(model.id);
    return model;
  }

  /** A set's create: on the gateway its placement chooses, the next one when that one is unreachable or full. */
  async #createPlaced(
    router: GatewayRouter,
    spec: Parameters<GatewayClient['createKernel']>[0],
    opts: Parameters<GatewayClient['createKernel']>[1] & {},
  ): Promise<KernelModel> {
    const tried = new Set<GatewayClient>();
    let last: unknown;
    for (;;) {
      let client: GatewayClient;
      try {
        client = await router.placeKernel({ kernelName: spec.name }, tried);
      } catch (error) {
        throw last ?? error;
      }
      tried.add(client);
      try {
        const model = await client.createKernel(spec, opts);
        router.settled(client, {});
        router.placed(client, model.id);
        return model;
      } catch (error) {
        const unreachable = GatewayUnavailableError.isInstance(error) ? error : undefined;
        router.settled(client, unreachable ? { unreachable } : {});
        if (opts.signal?.aborted || !(unreachable || GatewayCapacityError.isInstance(error))) throw error;
        last = error;
      }
    }
  }

  /** The error of a refused create: capacity and start-queue answers (HTTP 503 with a reason) typed as such. */
  #createRefused(res: Answer, name: string): KernelStartError | GatewayBusyError {
    const text = res.body.trim();
    const summary = summarizeErrorBody(text);
    const clipped = summary.length > 300 ? `${summary.slice(0, 300)}…` : summary;
    const detail = clipped ? `: ${this.#redact(clipped)}` : '';
    const refused =
      res.status === 503
        ? capacityAnswer(text)
        : res.status === 403
          ? resourceLimitAnswer(text)
          : res.status === 500
            ? launchTimeoutAnswer(text)
            : undefined;
    const message = `Failed to create kernel "${name}" on gateway ${this.baseUrl}: HTTP ${res.status}${detail}`;
    if (refused?.reason === 'at-capacity') {
      return new GatewayCapacityError(message, {
        status: res.status,
        ...(refused.maxKernels === undefined ? {} : { maxKernels: refused.maxKernels }),
      });
    }
    if (refused?.reason === 'busy') {
      return new GatewayBusyError(message, {
        ...(refused.waitedMs === undefined ? {} : { waitedMs: refused.waitedMs }),
      });
    }
    return new KernelStartError(message, { status: res.status });
  }

  /** Interrupts a kernel (`POST /api/kernels/{id}/interrupt`); throws on any non-2xx answer. */
  async interruptKernel(id: string, opts: RequestOptions = {}): Promise<void> {
    if (this.#router) return this.#routed(id, opts, (c) => c.interruptKernel(id, opts), 'interruptKernel');
    await this.#request('POST', `/api/kernels/${checkedKernelId(id, 'GatewayClient.interruptKernel')}/interrupt`, opts);
  }

  /**
   * Restarts a kernel (`POST /api/kernels/{id}/restart`): the server stops the process (killing it if it ignores
   * the shutdown request) and starts a fresh one under the same id; resolves once the new one is ready.
   */
  async restartKernel(id: string, opts: RequestOptions = {}): Promise<KernelModel> {
    if (this.#router) return this.#routed(id, opts, (c) => c.restartKernel(id, opts), 'restartKernel');
    const path = `/api/kernels/${checkedKernelId(id, 'GatewayClient.restartKernel')}/restart`;
    const res = await this.#request('POST', path, opts);
    return this.#parse(schemas().kernelModel, this.#json(res, `POST ${path}`), `POST ${path}`);
  }

  /**
   * Deletes a kernel (`DELETE /api/kernels/{id}`). Resolves `{ status }` when it is gone — a 2xx, or 404/410 for a
   * kernel that was already gone; throws otherwise.
   */
  async deleteKernel(id: string, opts: RequestOptions = {}): Promise<{ status: number }> {
    if (this.#router) {
      const router = this.#router;
      const owner = await this.#owner(checkedKernelId(id, 'GatewayClient.deleteKernel'), opts);
      if (!owner) return { status: 404 };
      const answer = await owner.deleteKernel(id, opts);
      router.forget(id);
      return answer;
    }
    const path = `/api/kernels/${checkedKernelId(id, 'GatewayClient.deleteKernel')}`;
    const res = await this.#request('DELETE', path, opts, [404, 410]);
    this.ownership?.deleted(id);
    return { status: res.status };
  }

  /**
   * One read of a kernel's journal (`GET /api/kernels/<id>/journal`, see docs/journal-protocol.md), on a server that
   * keeps one (the embedded gateway); undefined when it answers 404 (no journal, or no record of what was asked).
   * `collectCell()` (kernel-journal.ts) builds on it.
   */
  async kernelJournal(
    id: string,
    query: KernelJournalQuery,
    opts: RequestOptions = {},
  ): Promise<KernelJournalPage | undefined> {
    // Pages fit the client's body limit (half of it: the answer's own fields and JSON escaping besides).
    const paged = query.maxBytes === undefined ? { ...query, maxBytes: Math.floor(this.#maxResponseBytes / 2) } : query;
    const path = `/api/kernels/${checkedKernelId(id, 'GatewayClient.kernelJournal')}/journal?${kernelJournalSearch(paged)}`;
    const res = await this.#request('GET', path, opts, [404]);
    if (res.status === 404) return undefined;
    return this.#parse(kernelJournalPageSchema(), this.#json(res, `GET ${path}`), `GET ${path}`);
  }

  /**
   * Sends one request and reads its whole body, both under the request's deadline and signal, the body capped at
   * `maxResponseBytes` (counted after decompression).
   */
  async #request(
    method: string,
    path: string,
    opts: RequestOptions & { body?: unknown; capacity403?: boolean; transport?: GatewayRequest | undefined },
    accept: number[] | 'any' = [],
  ): Promise<Answer> {
    const label = `${method} ${path}`;
    const timeoutMs = effectiveTimeout(opts.timeoutMs ?? this.#requestTimeoutMs);
    const scope = abortScope({
      signal: opts.signal,
      timeoutMs,
      timeoutMessage: `Gateway at ${this.baseUrl} did not answer ${label} within ${timeoutMs} ms`,
    });
    try {
      scope.throwIfAborted();
      const headers: Record<string, string> = {};
      if (this.#token) headers.Authorization = `token ${this.#token}`;
      if (opts.body !== undefined) headers['Content-Type'] = 'application/json';
      const url = `${this.baseUrl}${path}`;
      const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
      const limit = this.#maxResponseBytes;
      const tooLarge = () =>
        new GatewayResponseTooLargeError(
          `Gateway at ${this.baseUrl} answered ${label} with a body larger than ${limit} bytes (maxResponseBytes); it was not read further`,
          { url: this.baseUrl, request: label, limitBytes: limit },
        );
      let res: Answer;
      const transport = opts.transport ?? this.#transport;
      try {
        if (transport) {
          const init = { method, headers, ...(body === undefined ? {} : { body }), signal: scope.signal };
          const answer = await scope.race(transport(url, { ...init, maxResponseBytes: limit }));
          const text = await scope.race(answer.text());
          // A transport that ignores maxResponseBytes has read it all: it is still not handed on.
          if (text.length > limit || Buffer.byteLength(text) > limit) throw tooLarge();
          res = { status: answer.status, ok: answer.status >= 200 && answer.status < 300, body: text };
        } else {
          const response = await scope.race(
            (this.#fetch ?? globalThis.fetch)(url, { method, headers, body, signal: scope.signal }),
          );
          res = { status: response.status, ok: response.ok, body: await readCapped(response, limit, scope, tooLarge) };
        }
      } catch (error) {
        if (scope.signal.aborted) throw scope.signal.reason;
        if (isTimeoutError(error) || GatewayResponseTooLargeError.isInstance(error)) throw error;
        throw new GatewayUnavailableError(
          `Gateway at ${this.baseUrl} is unreachable (${describeCause(error)}) on ${label}: check that the server is running and the URL is right`,
          { url: this.baseUrl, cause: error },
        );
      }
      const capacity = opts.capacity403 === true && res.status === 403 && resourceLimitAnswer(res.body) !== undefined;
      if ((res.status === 401 || res.status === 403) && !capacity) {
        throw new GatewayAuthError(
          `Gateway at ${this.baseUrl} refused the token (${res.status}) on ${label}: check the token given to GatewayClient`,
          { status: res.status, url: this.baseUrl },
        );
      }
      if (accept !== 'any' && !res.ok && !accept.includes(res.status)) {
        const detail = this.#detail(res);
        throw new GatewayRequestError(`Gateway at ${this.baseUrl} answered ${label} with HTTP ${res.status}${detail}`, {
          status: res.status,
          request: label,
        });
      }
      return res;
    } finally {
      scope.dispose();
    }
  }

  #detail(res: Answer): string {
    const text = summarizeErrorBody(res.body.trim());
    if (!text) return '';
    const clipped = text.length > 300 ? `${text.slice(0, 300)}…` : text;
    return `: ${this.#redact(clipped)}`;
  }

  #redact(text: string): string {
    return this.#token ? text.split(this.#token).join('<token>') : text;
  }

  #json(res: Answer, label: string): unknown {
    try {
      return JSON.parse(res.body) as unknown;
    } catch (cause) {
      throw new ProtocolError(`Gateway at ${this.baseUrl} answered ${label} with a body that is not JSON`, { cause });
    }
  }

  #parse<S extends z.ZodType>(schema: S, body: unknown, label: string): z.output<S> {
    const parsed = schema.safeParse(body);
    if (parsed.success) return parsed.data;
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? ` at "${issue.path.join('.')}"` : '';
    throw new ProtocolError(
      `Gateway at ${this.baseUrl} answered ${label} with an unexpected body${where}: ${issue?.message ?? 'invalid'}`,
      { cause: parsed.error },
    );
  }
}

/** An answer `#request` read whole. */
interface Answer {
  readonly status: number;
  readonly ok: boolean;
  /** The body as text (empty when there was none). */
  readonly body: string;
}

/**
 * A fetch response's body as text, read chunk by chunk: past `limit` bytes (after fetch's decompression) the read
 * stops and `tooLarge()` is thrown; the scope's deadline or abort stops it too. The stream is cancelled either way.
 */
async function readCapped(
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

/**
 * Enterprise Gateway's 403 at its kernel limits: `{ reason: 'Forbidden', message: 'Resource Limit' }` (its
 * `max_kernels` check in the handler), or the kernel manager's "A max kernels limit has been set to N …" / "A max
 * kernels per user limit has been set to N …".
 */
function resourceLimitAnswer(text: string): { reason: 'at-capacity'; maxKernels?: number } | undefined {
  if (!text.startsWith('{')) return undefined;
  try {
    const body = JSON.parse(text) as { message?: unknown; reason?: unknown };
    const said = [body.message, body.reason].filter((v): v is string => typeof v === 'string').join(' ');
    if (/\bResource Limit\b/i.test(said)) return { reason: 'at-capacity' };
    const limit = /max kernels (?:per user )?limit has been set to (\d+)/i.exec(said);
    if (limit) return { reason: 'at-capacity', maxKernels: Number(limit[1]) };
    return undefined;
  } catch {
    return undefined;
  }
}

/**
 * Enterprise Gateway's 500 when a launch outlived its `KERNEL_LAUNCH_TIMEOUT`: a reason like "KernelID: '…' launch
 * timeout due to: Waited too long (30.0s) to get connection file" (it killed the kernel itself).
 */
function launchTimeoutAnswer(text: string): { reason: 'busy'; waitedMs?: number } | undefined {
  if (!text.startsWith('{')) return undefined;
  try {
    const body = JSON.parse(text) as { message?: unknown; reason?: unknown };
    const said = [body.message, body.reason].filter((v): v is string => typeof v === 'string').join(' ');
    if (!/launch timeout/i.test(said)) return undefined;
    const waited = /\((\d+(?:\.\d+)?)s\)/.exec(said);
    return waited ? { reason: 'busy', waitedMs: Math.round(Number(waited[1]) * 1000) } : { reason: 'busy' };
  } catch {
    return undefined;
  }
}

/** The embedded gateway's 503 body: `{ reason: 'at-capacity' | 'busy', max_kernels?, waited_ms? }`. */
function capacityAnswer(
  text: string,
): { reason: 'at-capacity' | 'busy'; maxKernels?: number; waitedMs?: number } | undefined {
  if (!text.startsWith('{')) return undefined;
  try {
    const body = JSON.parse(text) as { reason?: unknown; max_kernels?: unknown; waited_ms?: unknown };
    if (body.reason !== 'at-capacity' && body.reason !== 'busy') return undefined;
    return {
      reason: body.reason,
      ...(typeof body.max_kernels === 'number' ? { maxKernels: body.max_kernels } : {}),
      ...(typeof body.waited_ms === 'number' ? { waitedMs: body.waited_ms } : {}),
    };
  } catch {
    return undefined;
  }
}

function describeCause(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause;
  if (cause && typeof cause.code === 'string') return cause.code;
  if (error instanceof Error) return error.message;
  return String(error);
}

/**
 * Jupyter servers answer errors with `{ message, reason, traceback }`: keep the message, the reason and the
 * traceback's last line (the exception itself, e.g. `FileNotFoundError: … 'R'`), not the whole traceback.
 */
function summarizeErrorBody(text: string): string {
  if (!text.startsWith('{')) return text;
  try {
    const body = JSON.parse(text) as { message?: unknown; reason?: unknown; traceback?: unknown };
    const parts: string[] = [];
    if (typeof body.message === 'string' && body.message) parts.push(body.message);
    if (typeof body.reason === 'string' && body.reason && body.reason !== body.message) parts.push(body.reason);
    if (typeof body.traceback === 'string') {
      const last = body.traceback
        .split('\n')
        .map((line) => line.trim())
        .filter(Boolean)
        .at(-1);
      if (last && !parts.includes(last)) parts.push(last);
    }
    return parts.length > 0 ? parts.join(' — ') : text;
  } catch {
    return text;
  }
}
