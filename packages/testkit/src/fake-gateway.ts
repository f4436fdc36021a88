import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { type Clock, sleep, systemClock } from '@kernelwarden/core';
import { V1_SUBPROTOCOL, type WireFormat } from '@kernelwarden/jupyter-protocol';
import { WebSocketServer } from 'ws';
import { FakeChannels } from './fake-gateway-channels.js';
import { checkLaunch } from './fake-gateway-enterprise.js';
import { queryOf, readBody, routeOf } from './fake-gateway-http.js';
import { authOf, kernelSpecsModel, parseBody, writeJson } from './fake-gateway-rest.js';
import type {
  FakeGatewayOptions,
  FakeGatewayRoute,
  FakeKernelSpec,
  FaultAnswer,
  RecordedFrame,
  RecordedRequest,
} from './fake-gateway-types.js';
import { FakeKernel, type KernelHost } from './fake-kernel.js';
import { pythonLikeScript } from './fake-kernel-script.js';

/**
 * A real HTTP + WebSocket server on 127.0.0.1 (port 0) that speaks the Jupyter Server REST API and the kernel
 * channels protocol in both wire formats, with simulated kernels driven by scripts, faults injected on cue, and a
 * record of every request and frame.
 *
 * Use it to test code that drives kernels through a gateway (`await using gw = await FakeGateway.start()`), for what
 * a real server cannot be made to do on cue: a 503 on create, a DELETE that hangs, a dropped socket, a bad frame.
 *
 * With `flavor: 'enterprise-gateway'` it plays Jupyter Enterprise Gateway's create: a launch that blocks the create
 * (`launchDelayMs`) and is killed with HTTP 500 past `KERNEL_LAUNCH_TIMEOUT` (else `launchTimeoutSeconds`), 403
 * "Resource Limit" at `maxKernels` (launches in progress count) and the per-user 403 at `maxKernelsPerUser`, the
 * create's `env` filtered to `KERNEL_*` and `clientEnvs` names and refused (400) for a non-string value, one over
 * 4,096 characters or one holding `$`, a backtick, CR, LF or NUL, `KERNEL_ID` honoured as the kernel's id (a value
 * that is not a UUID v4 fails the create), `KERNEL_USERNAME` filled in. The kernel's `launchEnv` is what it got.
 */
export class FakeGateway implements AsyncDisposable {
  /** `http://127.0.0.1:<port>`. */
  readonly baseUrl: string;
  /** The token clients must send, or `undefined` when auth is off. */
  readonly token: string | undefined;
  /** Every HTTP request and channels handshake, in arrival order. */
  readonly requests: RecordedRequest[] = [];
  /** Every channels frame in both directions, in order. */
  readonly frames: RecordedFrame[] = [];
  /** Delay before a channels handshake completes (a slow server), in ms of the gateway's clock. */
  handshakeDelayMs = 0;

  readonly #server: Server;
  readonly #wss: WebSocketServer;
  readonly #opts: FakeGatewayOptions;
  readonly #clock: Clock;
  readonly #specs: Record<string, FakeKernelSpec>;
  readonly #defaultName: string;
  readonly #formats: readonly WireFormat[];
  readonly #kernels = new Map<string, FakeKernel>();
  readonly #created: FakeKernel[] = [];
  readonly #channels = new FakeChannels(this.frames, () => this.#closed !== undefined);
  readonly #faults = new Map<FakeGatewayRoute, FaultAnswer[]>();
  readonly #sockets = new Set<Socket | Duplex>();
  #closed: Promise<void> | undefined;
  #unlisten: () => void = () => {};
  readonly #host: KernelHost;

  private constructor(server: Server, opts: FakeGatewayOptions) {
    this.#server = server;
    this.#opts = opts;
    this.#clock = opts.clock ?? systemClock;
    this.#specs = opts.kernelSpecs ?? { python3: {} };
    this.#defaultName = opts.defaultKernelName ?? Object.keys(this.#specs)[0] ?? 'python3';
    this.#formats = opts.wireFormats ?? ['v1', 'legacy'];
    this.token = opts.token === false ? undefined : (opts.token ?? randomBytes(24).toString('hex'));
    const { port } = server.address() as AddressInfo;
    this.baseUrl = `http://127.0.0.1:${port}`;
    this.#wss = new WebSocketServer({
      noServer: true,
      handleProtocols: (protocols) =>
        protocols.has(V1_SUBPROTOCOL) && this.#formats.includes('v1') ? V1_SUBPROTOCOL : false,
    });
    this.#host = {
      clock: this.#clock,
      deliver: (kernel, msg, toSession) => this.#channels.deliver(kernel, msg, toSession),
      deliverRaw: (kernel, data) => this.#channels.deliverRaw(kernel, data),
      removed: (kernel) => this.#kernels.delete(kernel.id),
    };
    server.on('connection', (socket) => {
      this.#sockets.add(socket);
      socket.once('close', () => this.#sockets.delete(socket));
    });
    server.on('request', (req, res) => void this.#onRequest(req, res));
    server.on('upgrade', (req, socket, head) => void this.#onUpgrade(req, socket, head));
  }

  /** Starts a gateway on 127.0.0.1, port 0. Dispose it (`await using`) or call `close()` when done. */
  static async start(opts: FakeGatewayOptions = {}): Promise<FakeGateway> {
    opts.signal?.throwIfAborted();
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    const gateway = new FakeGateway(server, opts);
    const onAbort = () => void gateway.close();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    gateway.#unlisten = () => opts.signal?.removeEventListener('abort', onAbort);
    return gateway;
  }

  /** The live kernels by id. */
  get kernels(): ReadonlyMap<string, FakeKernel> {
    return this.#kernels;
  }

  /**
   * The kernel with this id (live or deleted), or without an id the most recently created one; throws when there is
   * none.
   */
  kernel(id?: string): FakeKernel {
    const found = id === undefined ? this.#created.at(-1) : this.#created.find((k) => k.id === id);
    if (!found)
      throw new Error(id === undefined ? 'FakeGateway has created no kernel yet' : `FakeGateway has no kernel ${id}`);
    return found;
  }

  /** How many channels sockets of this kernel are open. */
  connections(kernelId: string): number {
    return this.#channels.count(kernelId);
  }

  /**
   * Answers the next requests of `route` with `answers`, one each, in order; later requests behave normally again.
   * E.g. `gw.failNext('create', 503, 503)` or `gw.failNext('delete', 'hang')`.
   */
  failNext(route: FakeGatewayRoute, ...answers: FaultAnswer[]): this {
    const queue = this.#faults.get(route) ?? [];
    queue.push(...answers);
    this.#faults.set(route, queue);
    return this;
  }

  /**
   * Drops the channels socket abruptly (no close frame) right after it has sent `messages` more messages (of one
   * kernel, or any). Messages the kernel sends meanwhile are buffered and replayed to a reconnect with the same
   * `session_id`, as jupyter_server does; a different session discards them. With `lose`, the next `lose` messages
   * the kernel sends after the drop are lost instead (neither sent nor buffered, even to a socket reopened
   * meanwhile), as jupyter_server loses what it writes to a socket before it has noticed that socket died.
   */
  dropChannelsAfter(messages: number, opts: { kernelId?: string; lose?: number } = {}): this {
    this.#channels.dropAfter(messages, opts.kernelId, opts.lose ?? 0);
    return this;
  }

  /** Closes every socket, stops every kernel and the server. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      this.#unlisten();
      this.#closing.abort();
      for (const kernel of this.#kernels.values()) kernel.shutdown();
      this.#kernels.clear();
      this.#channels.terminateAll();
      this.#wss.close();
      for (const s of this.#sockets) s.destroy();
      await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    })();
    return this.#closed;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  // ---- REST -------------------------------------------------------------------------------------------------------

  async #onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.baseUrl);
    const method = (req.method ?? 'GET').toUpperCase();
    const { route, kernelId } = routeOf(method, url.pathname);
    const body = parseBody(await readBody(req));
    const record: RecordedRequest = {
      method,
      path: url.pathname,
      query: queryOf(url),
      route,
      ...(kernelId ? { kernelId } : {}),
      ...(body !== undefined ? { body } : {}),
      auth: this.#auth(req, url),
      answer: 0,
    };
    this.requests.push(record);
    if (this.token !== undefined && (record.auth === 'none' || record.auth === 'bad')) {
      this.#json(res, record, 403, { message: 'Forbidden', reason: null });
      return;
    }
    const eg = this.#opts.flavor === 'enterprise-gateway';
    if (route === 'list' && eg && this.#opts.listKernels === false && !this.#faults.get(route)?.length) {
      this.#json(res, record, 403, { reason: 'Forbidden', message: 'Forbidden' });
      return;
    }
    if (route === 'create' && eg && !this.#faults.get(route)?.length) {
      await this.#launch(body, res, record);
      return;
    }
    const fault = this.#faults.get(route)?.shift();
    if (fault !== undefined) {
      if (fault === 'hang') {
        record.answer = 'hang';
        return;
      }
      if (fault === 'reset') {
        record.answer = 'reset';
        req.socket.destroy();
        return;
      }
      const f = typeof fault === 'number' ? { status: fault } : fault;
      if (f.delayMs) await sleep(f.delayMs, { clock: this.#clock });
      // A status below 400 without a body is a delayed success: answered normally once the delay has passed.
      if (f.status >= 400 || f.body !== undefined) {
        this.#json(res, record, f.status, f.body ?? { message: `Injected fault ${f.status}`, reason: null });
        return;
      }
    }
    this.#route(route, kernelId, body, res, record);
  }

  #route(
    route: FakeGatewayRoute,
    kernelId: string | undefined,
    body: unknown,
    res: ServerResponse,
    record: RecordedRequest,
  ): void {
    const [status, answer] = this.#answer(route, kernelId, body, res);
    this.#json(res, record, status, answer);
  }

  #answer(
    route: FakeGatewayRoute,
    kernelId: string | undefined,
    body: unknown,
    res: ServerResponse,
  ): [number, unknown] {
    const kernel = kernelId ? this.#kernels.get(kernelId) : undefined;
    if (kernelId && !kernel && route !== 'unknown') {
      return [404, { message: `Kernel does not exist: ${kernelId}`, reason: null }];
    }
    switch (route) {
      case 'api':
        return [200, { version: '1.23.3' }];
      case 'kernelspecs':
        return [200, kernelSpecsModel(this.#specs, this.#defaultName)];
      case 'list':
        return [200, [...this.#kernels.values()].map((k) => k.model(this.connections(k.id)))];
      case 'get':
        return [200, kernel?.model(this.connections(kernel.id))];
      case 'create': {
        const b = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
        const name = typeof b.name === 'string' && b.name ? b.name : this.#defaultName;
        const spec = this.#specs[name];
        if (!spec) return [500, { message: `No such kernel named ${name}`, reason: null }];
        const created = new FakeKernel(this.#host, name, b, {
          ...spec,
          script: spec.script ?? this.#opts.script ?? pythonLikeScript,
        });
        this.#kernels.set(created.id, created);
        this.#created.push(created);
        res.setHeader('Location', `/api/kernels/${created.id}`);
        return [201, created.model(0)];
      }
      case 'delete': {
        kernel?.shutdown();
        if (kernel) {
          this.#kernels.delete(kernel.id);
          this.#channels.forget(kernel);
        }
        return [204, undefined];
      }
      case 'interrupt':
        kernel?.interrupt();
        return [204, undefined];
      case 'restart':
        kernel?.restart();
        return [200, kernel?.model(this.connections(kernel.id))];
      default:
        return [404, { message: 'Not Found', reason: null }];
    }
  }

  /**
   * Enterprise Gateway's create: limits (403), env rules and filtering (400), `KERNEL_ID` as the kernel's id, a launch
   * that blocks the create for `launchDelayMs`, killed with HTTP 500 past its launch timeout.
   */
  async #launch(body: unknown, res: ServerResponse, record: RecordedRequest): Promise<void> {
    const opts = this.#opts;
    const b = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
    const fail = (status: number, reason: string, message = '') => this.#json(res, record, status, { reason, message });
    const checked = checkLaunch(b, opts, {
      kernelUsers: [...this.#kernels.values()].map((k) => k.launchEnv.KERNEL_USERNAME),
      launchingUsers: [...this.#launching.values()],
    });
    if ('refused' in checked) return fail(checked.status, checked.reason, checked.message);
    const { id, username, env } = checked;
    const name = typeof b.name === 'string' && b.name ? b.name : this.#defaultName;
    const spec = this.#specs[name];
    if (!spec) return fail(404, 'Not Found', `Kernel spec '${name}' not found`);
    const timeoutSeconds = Number(env.KERNEL_LAUNCH_TIMEOUT ?? opts.launchTimeoutSeconds ?? 30);
    const delay = opts.launchDelayMs ?? 0;
    const launch = Symbol(id);
    this.#launching.set(launch, username);
    try {
      const timeoutMs = Number.isFinite(timeoutSeconds) ? timeoutSeconds * 1000 : Number.POSITIVE_INFINITY;
      if (delay > 0) await sleep(Math.min(delay, timeoutMs), { clock: this.#clock, signal: this.#closing.signal });
      if (delay > timeoutMs) {
        return fail(
          500,
          `KernelID: '${id}' launch timeout due to: Waited too long (${timeoutSeconds.toFixed(1)}s) to get connection file`,
        );
      }
    } catch {
      record.answer = 'reset';
      return;
    } finally {
      this.#launching.delete(launch);
    }
    if (this.#closed) return;
    const created = new FakeKernel(this.#host, name, b, {
      ...spec,
      script: spec.script ?? opts.script ?? pythonLikeScript,
      id,
      launchEnv: env,
    });
    this.#kernels.set(created.id, created);
    this.#created.push(created);
    res.setHeader('Location', `/api/kernels/${created.id}`);
    this.#json(res, record, 201, created.model(0));
  }

  /** Launches in progress on an Enterprise Gateway flavoured gateway, with their user. */
  readonly #launching = new Map<symbol, string>();
  readonly #closing = new AbortController();

  #auth(req: IncomingMessage, url: URL): RecordedRequest['auth'] {
    return authOf(req, url, this.token);
  }

  #json(res: ServerResponse, record: RecordedRequest, status: number, body: unknown): void {
    writeJson(res, record, status, body);
  }

  // ---- channels ---------------------------------------------------------------------------------------------------

  async #onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
    socket.on('error', () => {});
    const url = new URL(req.url ?? '/', this.baseUrl);
    const { route, kernelId } = routeOf('GET', url.pathname);
    const record: RecordedRequest = {
      method: 'GET',
      path: url.pathname,
      query: queryOf(url),
      route,
      ...(kernelId ? { kernelId } : {}),
      auth: this.#auth(req, url),
      answer: 0,
    };
    this.requests.push(record);
    const refuse = (status: number) => {
      record.answer = status;
      socket.end(
        `HTTP/1.1 ${status} ${status === 403 ? 'Forbidden' : 'Error'}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`,
      );
    };
    if (route !== 'channels') return refuse(404);
    if (this.token !== undefined && (record.auth === 'none' || record.auth === 'bad')) return refuse(403);
    const kernel = kernelId ? this.#kernels.get(kernelId) : undefined;
    if (!kernel) return refuse(404);
    const fault = this.#faults.get('channels')?.shift();
    if (fault === 'hang') {
      record.answer = 'hang';
      return;
    }
    if (fault === 'reset') {
      record.answer = 'reset';
      socket.destroy();
      return;
    }
    if (fault !== undefined) {
      const f = typeof fault === 'number' ? { status: fault } : fault;
      if (f.delayMs) await sleep(f.delayMs, { clock: this.#clock });
      if (f.status >= 400) return refuse(f.status);
    }
    if (this.handshakeDelayMs > 0) await sleep(this.handshakeDelayMs, { clock: this.#clock });
    if (this.#closed || socket.destroyed) return;
    const offered = String(req.headers['sec-websocket-protocol'] ?? '')
      .split(',')
      .map((p) => p.trim())
      .filter(Boolean);
    const v1 = offered.includes(V1_SUBPROTOCOL) && this.#formats.includes('v1');
    if (!v1 && !this.#formats.includes('legacy')) return refuse(400);
    this.#wss.handleUpgrade(req, socket, head, (ws) => {
      record.answer = 'upgraded';
      this.#channels.attach(ws, kernel, url.searchParams.get('session_id') ?? undefined, v1 ? 'v1' : 'legacy');
    });
  }
}
