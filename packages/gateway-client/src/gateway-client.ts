import type { z } from 'zod/v3';
import { createRequestBody } from './create-request.js';
import { isWsClass } from './default-websocket.js';
import { type GatewayBusyError, GatewayRequestError, type KernelStartError } from './errors.js';
import { createRefusedError } from './gateway-answers.js';
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
import { createPlaced, ownerOf } from './gateway-routing.js';
import {
  type Answer,
  answerJson,
  parseAnswer,
  type RequestOptions,
  redactToken,
  type SendOptions,
  sendRequest,
  type TransportConfig,
} from './gateway-transport.js';
import { checkedKernelId } from './kernel-id.js';
import {
  type KernelJournalPage,
  type KernelJournalQuery,
  kernelJournalPageSchema,
  kernelJournalSearch,
} from './kernel-journal.js';
import { type KernelModel, type KernelSpecModel, type KernelSpecsModel, schemas } from './kernel-models.js';
import { defaultKernelUsername } from './launch-env.js';

export type {
  GatewayAnswer,
  GatewayClientOptions,
  GatewayFlavor,
  GatewayRequest,
  KernelDiagnostics,
  KernelModel,
  KernelOwnership,
  KernelPool,
  KernelProcesses,
  KernelSpecModel,
  KernelSpecsModel,
  RequestOptions,
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
  /** The address, token, transport and limits every request is sent with. */
  readonly #config: TransportConfig;

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
      this.#config = {
        baseUrl: this.baseUrl,
        token: undefined,
        fetch: undefined,
        transport: undefined,
        requestTimeoutMs: DEFAULT_REQUEST_TIMEOUT_MS,
        maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES,
      };
      this.WebSocket = first.WebSocket;
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
    this.#config = {
      baseUrl: opts.baseUrl,
      token: opts.token,
      fetch: opts.fetch,
      transport: opts.request,
      requestTimeoutMs: opts.requestTimeoutMs,
      maxResponseBytes: opts.maxResponseBytes,
    };
    this.WebSocket = opts.WebSocket;
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
  #owner(kernelId: string, opts: RequestOptions): Promise<GatewayClient | undefined> {
    return ownerOf<GatewayClient>(this.#router as GatewayRouter, kernelId, opts);
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
    return this.#config.token !== undefined;
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
    if (!this.#config.token) return { url: base, headers: {} };
    if (isWsClass(this.WebSocket)) return { url: base, headers: { Authorization: `token ${this.#config.token}` } };
    return { url: `${base}&token=${encodeURIComponent(this.#config.token)}`, headers: {} };
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
    if (this.#router) return createPlaced<typeof spec, typeof opts, GatewayClient>(this.#router, spec, opts);
    const { chosen, body } = createRequestBody(
      spec,
      () => this.kernelUsername,
      `Kernel create on gateway ${this.baseUrl}`,
    );
    this.ownership?.creating?.(chosen);
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

  /** The error of a refused create: capacity and start-queue answers (HTTP 503 with a reason) typed as such. */
  #createRefused(res: Answer, name: string): KernelStartError | GatewayBusyError {
    return createRefusedError(res, name, this.baseUrl, (text) => redactToken(text, this.#config.token));
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
   * `collectCell()` (collect-cell.ts) builds on it.
   */
  async kernelJournal(
    id: string,
    query: KernelJournalQuery,
    opts: RequestOptions = {},
  ): Promise<KernelJournalPage | undefined> {
    // Pages fit the client's body limit (half of it: the answer's own fields and JSON escaping besides).
    const paged =
      query.maxBytes === undefined ? { ...query, maxBytes: Math.floor(this.#config.maxResponseBytes / 2) } : query;
    const path = `/api/kernels/${checkedKernelId(id, 'GatewayClient.kernelJournal')}/journal?${kernelJournalSearch(paged)}`;
    const res = await this.#request('GET', path, opts, [404]);
    if (res.status === 404) return undefined;
    return this.#parse(kernelJournalPageSchema(), this.#json(res, `GET ${path}`), `GET ${path}`);
  }

  #request(method: string, path: string, opts: SendOptions, accept: number[] | 'any' = []): Promise<Answer> {
    return sendRequest(this.#config, method, path, opts, accept);
  }

  #json(res: Answer, label: string): unknown {
    return answerJson(this.baseUrl, res, label);
  }

  #parse<S extends z.ZodType>(schema: S, body: unknown, label: string): z.output<S> {
    return parseAnswer(this.baseUrl, schema, body, label);
  }
}
