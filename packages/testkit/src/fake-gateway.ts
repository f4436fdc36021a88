import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { type Clock, sleep, systemClock } from '@kernelwarden/core';
import {
  decodeFrame,
  encodeFrame,
  type JupyterMessage,
  V1_SUBPROTOCOL,
  type WireFormat,
} from '@kernelwarden/jupyter-protocol';
import { type RawData, type WebSocket, WebSocketServer } from 'ws';
import { FakeKernel, type FakeKernelOptions, type KernelHost } from './fake-kernel.js';
import { type KernelScript, pythonLikeScript } from './fake-kernel-script.js';

/** One kernelspec a FakeGateway offers, and how kernels made from it behave. */
export interface FakeKernelSpec extends FakeKernelOptions {
  /** `spec.display_name`. @defaultValue the spec's name */
  displayName?: string;
  /** `spec.argv`. @defaultValue a python -m ipykernel_launcher command line */
  argv?: string[];
  /** `spec.env`. @defaultValue {} */
  env?: Record<string, string>;
}

/** Options of `FakeGateway.start()`. */
export interface FakeGatewayOptions {
  /** The token clients must send (`Authorization: token …` or `?token=`); `false` turns auth off. @defaultValue a random token */
  token?: string | false;
  /** The script of every kernelspec that has none. @defaultValue pythonLikeScript */
  script?: KernelScript;
  /** The kernelspecs offered, by name. @defaultValue `{ python3: {} }` */
  kernelSpecs?: Record<string, FakeKernelSpec>;
  /** The kernelspec used when a create names none. @defaultValue the first of `kernelSpecs` */
  defaultKernelName?: string;
  /** The wire formats the channels socket accepts; v1 is picked when offered and allowed. @defaultValue ['v1', 'legacy'] */
  wireFormats?: WireFormat[];
  /** The clock of script sleeps and fault delays. @defaultValue systemClock */
  clock?: Clock;
  /** Aborting closes the gateway. */
  signal?: AbortSignal;
}

/** The REST routes and the channels handshake, as named in faults and records. */
export type FakeGatewayRoute =
  | 'api'
  | 'kernelspecs'
  | 'list'
  | 'get'
  | 'create'
  | 'delete'
  | 'interrupt'
  | 'restart'
  | 'channels'
  | 'unknown';

/**
 * How a faulted request is answered: an HTTP status (with a JSON error body), `'hang'` (never answered until the
 * client gives up or the gateway closes), `'reset'` (the connection is destroyed), or a status with a body and delay.
 */
export type FaultAnswer = number | 'hang' | 'reset' | { status: number; body?: unknown; delayMs?: number };

/** One HTTP request (or channels handshake) the gateway received. */
export interface RecordedRequest {
  method: string;
  /** The path without the query string. */
  path: string;
  /** The query parameters, except `token`. */
  query: Record<string, string>;
  route: FakeGatewayRoute;
  kernelId?: string;
  /** The parsed JSON body, when there was one. */
  body?: unknown;
  /** How the request authenticated: by header, by query, not at all, or with a wrong token. */
  auth: 'header' | 'query' | 'none' | 'bad';
  /** What it was answered. */
  answer: number | 'hang' | 'reset' | 'upgraded';
}

/** One channels frame, received from or sent to a client. */
export interface RecordedFrame {
  direction: 'in' | 'out';
  kernelId: string;
  sessionId: string | undefined;
  format: WireFormat;
  /** The decoded message; absent for frames that did not decode (see `error`) and raw frames sent by a script. */
  message?: JupyterMessage;
  /** The bytes or text on the wire. */
  raw: string | Uint8Array;
  /** Why an incoming frame could not be decoded. */
  error?: string;
  /** True for a buffered message replayed on reconnect. */
  replayed?: boolean;
}

interface Connection {
  readonly ws: WebSocket;
  readonly kernel: FakeKernel;
  readonly sessionId: string | undefined;
  readonly format: WireFormat;
  open: boolean;
  /** Messages held back until the replay of the buffered ones has run, so order is kept. */
  held?: { message: JupyterMessage; replayed: boolean }[];
}

const KERNEL_PATH = /^\/api\/kernels\/([^/]+)(?:\/(interrupt|restart|channels))?\/?$/;

/**
 * A real HTTP + WebSocket server on 127.0.0.1 (port 0) that speaks the Jupyter Server REST API and the kernel
 * channels protocol in both wire formats, with simulated kernels driven by scripts, faults injected on cue, and a
 * record of every request and frame.
 *
 * Use it to test code that drives kernels through a gateway (`await using gw = await FakeGateway.start()`), for what
 * a real server cannot be made to do on cue: a 503 on create, a DELETE that hangs, a dropped socket, a bad frame.
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
  readonly #connections = new Set<Connection>();
  readonly #buffers = new Map<string, { sessionId: string | undefined; messages: JupyterMessage[] }>();
  readonly #faults = new Map<FakeGatewayRoute, FaultAnswer[]>();
  readonly #sockets = new Set<Socket | Duplex>();
  #drop: { remaining: number; kernelId: string | undefined } | undefined;
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
      deliver: (kernel, msg, toSession) => this.#deliver(kernel, msg, toSession),
      deliverRaw: (kernel, data) => this.#deliverRaw(kernel, data),
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
    let n = 0;
    for (const c of this.#connections) if (c.open && c.kernel.id === kernelId) n++;
    return n;
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
   * `session_id`, as jupyter_server does; a different session discards them.
   */
  dropChannelsAfter(messages: number, opts: { kernelId?: string } = {}): this {
    this.#drop = { remaining: Math.max(0, messages), kernelId: opts.kernelId };
    if (this.#drop.remaining === 0) {
      for (const c of [...this.#connections]) if (!opts.kernelId || c.kernel.id === opts.kernelId) this.#terminate(c);
      this.#drop = undefined;
    }
    return this;
  }

  /** Closes every socket, stops every kernel and the server. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      this.#unlisten();
      for (const kernel of this.#kernels.values()) kernel.shutdown();
      this.#kernels.clear();
      for (const c of this.#connections) c.ws.terminate();
      this.#connections.clear();
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
    const raw = await readBody(req);
    let body: unknown;
    if (raw.length) {
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        body = raw.toString('utf8');
      }
    }
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
        return [200, this.#kernelSpecs()];
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
          this.#buffers.delete(kernel.id);
          for (const c of [...this.#connections]) if (c.kernel === kernel) this.#closeConnection(c, 1000);
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

  #kernelSpecs(): Record<string, unknown> {
    const kernelspecs: Record<string, unknown> = {};
    for (const [name, spec] of Object.entries(this.#specs)) {
      kernelspecs[name] = {
        name,
        spec: {
          argv: spec.argv ?? ['python', '-m', 'ipykernel_launcher', '-f', '{connection_file}'],
          env: spec.env ?? {},
          display_name: spec.displayName ?? name,
          language: spec.language ?? 'python',
          interrupt_mode: 'signal',
          metadata: {},
        },
        resources: {},
      };
    }
    return { default: this.#defaultName, kernelspecs };
  }

  #auth(req: IncomingMessage, url: URL): RecordedRequest['auth'] {
    const header = req.headers.authorization;
    const query = url.searchParams.get('token');
    if (header !== undefined) return header === `token ${this.token}` ? 'header' : 'bad';
    if (query !== null) return query === this.token ? 'query' : 'bad';
    return 'none';
  }

  #json(res: ServerResponse, record: RecordedRequest, status: number, body: unknown): void {
    record.answer = status;
    if (res.destroyed) return;
    if (status === 204 || body === undefined) {
      res.writeHead(status).end();
      return;
    }
    const text = JSON.stringify(body);
    res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) }).end(text);
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
      const sessionId = url.searchParams.get('session_id') ?? undefined;
      const conn: Connection = { ws, kernel, sessionId, format: v1 ? 'v1' : 'legacy', open: true };
      this.#connections.add(conn);
      ws.on('message', (data, isBinary) => this.#onFrame(conn, data, isBinary));
      ws.on('close', () => this.#closeConnection(conn));
      ws.on('error', () => {});
      const buffered = this.#buffers.get(kernel.id);
      this.#buffers.delete(kernel.id);
      if (buffered && buffered.sessionId === sessionId && buffered.messages.length) {
        // jupyter_server replays once its nudge (a kernel_info round trip) is done, not within the handshake.
        conn.held = buffered.messages.map((message) => ({ message, replayed: true }));
        setImmediate(() => {
          const held = conn.held ?? [];
          conn.held = undefined;
          for (const h of held) this.#send(conn, h.message, h.replayed);
        });
      }
    });
  }

  #onFrame(conn: Connection, data: RawData, isBinary: boolean): void {
    const raw = isBinary ? toBytes(data) : toBytes(data).toString('utf8');
    const frame: RecordedFrame = {
      direction: 'in',
      kernelId: conn.kernel.id,
      sessionId: conn.sessionId,
      format: conn.format,
      raw,
    };
    this.frames.push(frame);
    try {
      const message = decodeFrame(typeof raw === 'string' ? raw : new Uint8Array(raw), conn.format);
      frame.message = message;
      conn.kernel.receive(message, conn.sessionId);
    } catch (error) {
      frame.error = (error as Error).message; // jupyter_server logs and ignores a frame it cannot read
    }
  }

  #closeConnection(conn: Connection, code?: number): void {
    if (!conn.open && !this.#connections.has(conn)) return;
    const wasOpen = conn.open;
    conn.open = false;
    this.#connections.delete(conn);
    if (code !== undefined) conn.ws.close(code);
    if (wasOpen && conn.kernel.alive && this.connections(conn.kernel.id) === 0 && !this.#closed) {
      this.#buffers.set(conn.kernel.id, { sessionId: conn.sessionId, messages: [] });
    }
  }

  #terminate(conn: Connection): void {
    this.#closeConnection(conn);
    conn.ws.terminate();
  }

  #deliver(kernel: FakeKernel, msg: JupyterMessage, toSession: string | undefined): void {
    const targets = [...this.#connections].filter(
      (c) =>
        c.open &&
        c.kernel === kernel &&
        (msg.channel === 'iopub' || toSession === undefined || c.sessionId === toSession),
    );
    if (!targets.length) {
      if (this.connections(kernel.id) === 0) this.#buffers.get(kernel.id)?.messages.push(msg);
      return;
    }
    for (const conn of targets) {
      if (conn.held) conn.held.push({ message: msg, replayed: false });
      else this.#send(conn, msg, false);
    }
  }

  #deliverRaw(kernel: FakeKernel, data: string | Uint8Array): void {
    for (const conn of [...this.#connections]) {
      if (!conn.open || conn.kernel !== kernel) continue;
      this.frames.push({
        direction: 'out',
        kernelId: kernel.id,
        sessionId: conn.sessionId,
        format: conn.format,
        raw: data,
      });
      conn.ws.send(data, { binary: typeof data !== 'string' });
    }
  }

  #send(conn: Connection, msg: JupyterMessage, replayed: boolean): void {
    if (!conn.open) return;
    const raw = encodeFrame(msg, conn.format);
    this.frames.push({
      direction: 'out',
      kernelId: conn.kernel.id,
      sessionId: conn.sessionId,
      format: conn.format,
      message: msg,
      raw,
      ...(replayed ? { replayed } : {}),
    });
    conn.ws.send(raw, { binary: typeof raw !== 'string' });
    const drop = this.#drop;
    if (drop && (!drop.kernelId || drop.kernelId === conn.kernel.id) && --drop.remaining <= 0) {
      this.#drop = undefined;
      this.#terminate(conn);
    }
  }
}

function routeOf(method: string, path: string): { route: FakeGatewayRoute; kernelId?: string } {
  if (path === '/api' || path === '/api/') return { route: method === 'GET' ? 'api' : 'unknown' };
  if (/^\/api\/kernelspecs\/?$/.test(path)) return { route: method === 'GET' ? 'kernelspecs' : 'unknown' };
  if (/^\/api\/kernels\/?$/.test(path)) {
    return { route: method === 'GET' ? 'list' : method === 'POST' ? 'create' : 'unknown' };
  }
  const m = KERNEL_PATH.exec(path);
  if (!m) return { route: 'unknown' };
  const kernelId = decodeURIComponent(m[1] as string);
  const action = m[2];
  if (action === 'channels') return { route: method === 'GET' ? 'channels' : 'unknown', kernelId };
  if (action === 'interrupt' || action === 'restart')
    return { route: method === 'POST' ? action : 'unknown', kernelId };
  return { route: method === 'GET' ? 'get' : method === 'DELETE' ? 'delete' : 'unknown', kernelId };
}

function queryOf(url: URL): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of url.searchParams) if (k !== 'token') out[k] = v;
  return out;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', () => resolve(Buffer.concat(chunks)));
  });
}

function toBytes(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}
