import { type Clock, sleep } from '@kernelwarden/core';
import { encodeFrame, type JupyterMessage, V1_SUBPROTOCOL } from '@kernelwarden/jupyter-protocol';
import { GatewayAuthError, GatewayUnavailableError, ProtocolError } from './errors.js';
import { toBytes } from './frame-bytes.js';
import type { GatewayClient, WebSocketClass } from './gateway-client.js';
import { JournalFeed, type JournalRead } from './journal-feed.js';
import type { JournalNumber } from './kernel-journal.js';
import { connectError, errorOf } from './socket-errors.js';
import { decodeFrame } from './wire.js';

/** Which wire format to use: `'auto'` offers v1 and falls back to legacy when the server does not pick it. */
export type WireProtocol = 'auto' | 'v1' | 'legacy';

/** Reconnect policy of a kernel's channels socket. */
export interface ReconnectPolicy {
  /** Attempts after a drop before pending work fails; `0` disables reconnecting. @defaultValue 6 */
  attempts: number;
  /** Delay before the first attempt; doubles each time. @defaultValue 100 */
  initialDelayMs: number;
  /** Cap of the delay between attempts. @defaultValue 3000 */
  maxDelayMs: number;
  /**
   * How long one attempt may take to open the socket (a server or proxy that accepts the connection but never
   * answers the upgrade would otherwise hold the reconnect, and every cell waiting on it, for ever); `0` waits
   * without bound. @defaultValue 10000
   */
  attemptTimeoutMs: number;
}

/** Internal options of a `KernelChannel`. */
export interface KernelChannelOptions {
  WebSocket: WebSocketClass;
  url: string;
  /**
   * This client's session id. jupyter_server writes its own messages (`restarting`/`dead` status, rate-limit
   * notices) under it, numbered from 0 by each connection's handler: they are never replayed and their ids repeat
   * across connections, so they are exempt from duplicate dropping.
   */
  sessionId: string;
  headers: Record<string, string>;
  /** What errors name: the gateway's base URL and the kernel id (never the token). */
  where: string;
  protocol: WireProtocol;
  reconnect: ReconnectPolicy;
  /** The largest frame accepted (the socket's `maxPayload` with `ws`); a larger one is a protocol error. */
  maxFrameBytes: number;
  clock: Clock;
  onMessage(msg: JupyterMessage): void;
  onProtocolError(error: ProtocolError): void;
  /** A frame over `maxFrameBytes` was dropped unread (with `ws`, the socket closes and is reopened). */
  onFrameTooLarge(error: ProtocolError): void;
  onReconnecting(attempt: number, delayMs: number, cause: unknown): void;
  onReconnected(): void;
  onLost(error: Error): void;
  /**
   * The kernel's journal on the server (the embedded gateway), when it keeps one: from a drop until the socket can
   * take over again, kernel iopub messages are read from it (`JournalFeed`), every one once, in order.
   */
  journal?: JournalRead | undefined;
  /** The journal lost numbers (retention) before they were read from it. */
  onJournalLost?: ((lost: { from: JournalNumber; to: JournalNumber }) => void) | undefined;
  /** A read of the journal succeeded: every kernel iopub message up to it was handed on. */
  onJournalResumed?: (() => void) | undefined;
  /** No cell is in flight (the journal hands iopub back to the socket only then). */
  quiet?: (() => boolean) | undefined;
}

/** How many message ids are remembered to drop replayed duplicates. */
const DEDUPE_WINDOW = 4096;
/**
 * The longest kernel message id kept for de-duplication (jupyter_client's are about 50 characters): the window keeps
 * 4096 of them, so ids of megabytes would hold gigabytes. A longer one breaks the protocol.
 */
export const MAX_MESSAGE_ID_CHARS = 256;
const OPEN = 1;

/**
 * One kernel's channels WebSocket: negotiates the wire format, decodes frames strictly in arrival order, drops
 * replayed duplicates, and reconnects with the same session id after a drop (requests sent meanwhile are queued).
 * With the `ws` library it can also ping (for `Heartbeat`) and send unsolicited pongs (for `PongPolicy`); when to
 * do either is theirs to decide.
 */
export class KernelChannel {
  #opts: KernelChannelOptions;
  #socket: WebSocket | undefined;
  #format: 'v1' | 'legacy' = 'v1';
  #pong: (() => void) | undefined;
  /** Heartbeat: when the socket was last heard from (a message or a pong), and when an unanswered ping went out. */
  #lastHeardAt = 0;
  #pingSentAt: number | undefined;
  #ping: (() => void) | undefined;
  #closed = false;
  #closeController = new AbortController();
  #reconnecting = false;
  #queue: JupyterMessage[] = [];
  #seen = new Set<string>();
  #ring: string[] = new Array<string>(DEDUPE_WINDOW);
  #ringAt = 0;
  /** Messages received (after dedupe); lets the kernel see whether the socket is quiet. */
  received = 0;
  /** The id of the last kernel iopub message handed on: where a read of the journal starts. */
  #lastIopubId: string | undefined;
  /** Kernel iopub from the journal after a drop (with a journal). */
  #feed: JournalFeed | undefined;
  #feedController = new AbortController();

  constructor(opts: KernelChannelOptions) {
    this.#opts = opts;
    this.#feed = this.#newFeed();
  }

  #newFeed(): JournalFeed | undefined {
    const read = this.#opts.journal;
    if (!read) return undefined;
    return new JournalFeed({
      read,
      deliver: (msg) => {
        if (this.#remember(msg.header.msg_id)) this.#deliver(msg);
      },
      delivered: (id) => this.#seen.has(id),
      quiet: () => this.#opts.quiet?.() ?? true,
      socketOpen: () => this.isOpen,
      onCaughtUp: () => this.#opts.onJournalResumed?.(),
      onLost: (lost) => this.#opts.onJournalLost?.(lost),
      onUnavailable: () => {},
    });
  }

  /** The channels socket of kernel `kernelId` on `client`'s gateway, under `sessionId`. */
  static forKernel(
    client: GatewayClient,
    kernelId: string,
    sessionId: string,
    opts: {
      protocol: WireProtocol;
      reconnect: ReconnectPolicy;
      maxFrameBytes: number;
      clock: Clock;
      journal?: boolean | undefined;
    },
    handlers: Pick<
      KernelChannelOptions,
      | 'onMessage'
      | 'onProtocolError'
      | 'onFrameTooLarge'
      | 'onReconnecting'
      | 'onReconnected'
      | 'onLost'
      | 'onJournalLost'
      | 'onJournalResumed'
      | 'quiet'
    >,
  ): KernelChannel {
    const target = client.channelsTarget(kernelId, sessionId);
    const journal: JournalRead | undefined = opts.journal
      ? (query, signal) => client.kernelJournal(kernelId, query, { signal })
      : undefined;
    return new KernelChannel({
      WebSocket: client.WebSocket,
      url: target.url,
      sessionId,
      headers: target.headers,
      where: `kernel ${kernelId} at ${client.baseUrl}`,
      protocol: opts.protocol,
      reconnect: opts.reconnect,
      maxFrameBytes: opts.maxFrameBytes,
      clock: opts.clock,
      journal,
      ...handlers,
    });
  }

  /**
   * Points later connects at another kernel of the same gateway (a kernel replaced by a fresh one): the next
   * `reopen()` opens that kernel's channels under the same session id. Its replay de-duplication starts afresh.
   */
  retarget(client: GatewayClient, kernelId: string): void {
    const target = client.channelsTarget(kernelId, this.#opts.sessionId);
    this.#opts = {
      ...this.#opts,
      url: target.url,
      headers: target.headers,
      where: `kernel ${kernelId} at ${client.baseUrl}`,
      journal: undefined,
    };
    this.#feedController.abort();
    this.#feed = undefined;
    this.#lastIopubId = undefined;
    this.#seen.clear();
    this.#ring = new Array<string>(DEDUPE_WINDOW);
    this.#ringAt = 0;
  }

  /** The negotiated wire format. */
  get format(): 'v1' | 'legacy' {
    return this.#format;
  }

  /** True while the socket is open (not while reconnecting or after close). */
  get isOpen(): boolean {
    return !this.#closed && !this.#reconnecting && this.#socket?.readyState === OPEN;
  }

  /** True while a dropped socket is being reopened. */
  get isReconnecting(): boolean {
    return this.#reconnecting;
  }

  /** The sockets can send unsolicited pongs (the `ws` library's can; WHATWG sockets cannot). */
  get canPong(): boolean {
    return this.#pong !== undefined;
  }

  /** Sends an unsolicited pong on the socket; never throws. */
  pong(): void {
    this.#pong?.();
  }

  /** The sockets can ping (the `ws` library's can). */
  get canPing(): boolean {
    return this.#ping !== undefined;
  }

  /** Clock time of the last message or pong received, or of the socket's open. */
  get lastHeardAt(): number {
    return this.#lastHeardAt;
  }

  /** Clock time of a ping nothing answered yet (anything heard clears it). */
  get pingSentAt(): number | undefined {
    return this.#pingSentAt;
  }

  /** Sends a ping and records when. */
  ping(): void {
    if (!this.#ping) return;
    this.#pingSentAt = this.#opts.clock.now();
    this.#ping();
  }

  /**
   * Terminates a socket taken for hung (a connection can hang without closing: half-open TCP, a stalled proxy) and
   * reopens it like a dropped one.
   */
  dropHung(cause: Error): void {
    this.#dropped(cause, true);
  }

  /** Opens the socket, negotiating the format; rejects with the signal's reason on abort. */
  async open(signal?: AbortSignal): Promise<void> {
    const { protocol } = this.#opts;
    if (protocol === 'legacy') {
      await this.#connect('legacy', signal);
      return;
    }
    try {
      await this.#connect('v1', signal);
    } catch (error) {
      if (protocol === 'v1' || signal?.aborted || GatewayAuthError.isInstance(error) || this.#closed) throw error;
      await this.#connect('legacy', signal);
    }
  }

  /** Sends a message now, or queues it while the socket is being reopened. */
  send(msg: JupyterMessage): void {
    if (this.#closed) return;
    const socket = this.#socket;
    if (!socket || this.#reconnecting || socket.readyState !== OPEN) {
      this.#queue.push(msg);
      return;
    }
    socket.send(encodeFrame(msg, this.#format));
  }

  /** Closes the socket for good (no reconnect). Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#closeController.abort();
    this.#feedController.abort();
    this.#queue = [];
    const socket = this.#socket;
    this.#socket = undefined;
    if (socket) detach(socket);
    try {
      socket?.close();
    } catch {
      // already closing
    }
  }

  /**
   * Closes the current socket and opens a new one with the same session id (after a server-side restart, whose
   * new kernel process may listen on new ports). Messages sent meanwhile are queued.
   */
  async reopen(signal?: AbortSignal): Promise<void> {
    if (this.#closed) return;
    const old = this.#socket;
    this.#socket = undefined;
    this.#reconnecting = true;
    if (old) {
      detach(old);
      try {
        old.close();
      } catch {
        // already closing
      }
    }
    let socket: WebSocket;
    try {
      socket = await this.#connect(this.#format, signal);
    } finally {
      this.#reconnecting = false;
    }
    if (this.#socket !== socket) {
      if (!this.#closed) void this.#reconnectLoop(new Error('the channels WebSocket closed right after it reopened'));
      return;
    }
    this.#flush();
  }

  #attach(socket: WebSocket): void {
    if (this.#closed) {
      detach(socket);
      socket.close();
      return;
    }
    this.#socket = socket;
    this.#heard();
    const { ping, on } = socket as unknown as {
      ping?: () => void;
      on?: (event: string, listener: () => void) => void;
    };
    if (typeof ping === 'function' && typeof on === 'function') {
      this.#ping = () => {
        try {
          ping.call(socket);
        } catch {
          // closing: the next check drops it anyway
        }
      };
      on.call(socket, 'pong', () => {
        if (this.#socket === socket) this.#heard();
      });
    } else {
      this.#ping = undefined;
    }
    const pong = (socket as unknown as { pong?: () => void }).pong;
    this.#pong =
      typeof pong === 'function'
        ? () => {
            try {
              pong.call(socket);
            } catch {
              // socket closing: nothing to acknowledge
            }
          }
        : undefined;
    socket.onmessage = (event: MessageEvent) => this.#receive(event.data);
    socket.onclose = () => {
      if (this.#socket === socket) this.#dropped(new Error('the channels WebSocket closed'));
    };
    socket.onerror = (event: Event) => {
      if (this.#socket !== socket) return;
      const error = errorOf(event);
      if ((error as { code?: unknown } | undefined)?.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') {
        // `ws` refused a frame over maxPayload and closes the socket: the reconnect replays what the server buffered.
        this.#tooLarge(undefined);
      }
      this.#dropped(error);
    };
  }

  #receive(data: unknown): void {
    let msg: JupyterMessage;
    try {
      const bytes = toBytes(data, this.#format === 'v1');
      // `ws` enforces the limit before it buffers a frame; other WebSocket classes are checked here.
      if (bytes.length > this.#opts.maxFrameBytes) {
        this.#tooLarge(bytes.length);
        return;
      }
      msg = decodeFrame(bytes, this.#format);
    } catch (error) {
      this.#protocolError(error as ProtocolError);
      return;
    }
    const id = msg.header.msg_id;
    if (typeof id === 'string' && msg.header.session !== this.#opts.sessionId) {
      if (id.length > MAX_MESSAGE_ID_CHARS) {
        const parentId = msg.parent_header.msg_id;
        this.#protocolError(
          new ProtocolError(
            `A message from ${this.#opts.where} has a msg_id of ${id.length} characters, more than ${MAX_MESSAGE_ID_CHARS}`,
            typeof parentId === 'string' ? { parentMsgId: parentId } : {},
          ),
        );
        return;
      }
      if (this.#seen.has(id)) return;
      if (msg.channel === 'iopub' && this.#feed?.active) {
        // The journal hands the kernel's iopub on meanwhile; the socket's copy only says how far the socket got.
        this.#feed.socketDelivered(id);
        this.received++;
        this.#heard();
        return;
      }
      this.#remember(id);
    }
    this.received++;
    this.#heard();
    this.#deliver(msg);
  }

  #deliver(msg: JupyterMessage): void {
    if (msg.channel === 'iopub' && msg.header.session !== this.#opts.sessionId) this.#lastIopubId = msg.header.msg_id;
    try {
      this.#opts.onMessage(msg);
    } catch (error) {
      // Nothing a message carries may escape into the socket's event loop (an uncaught exception ends the process).
      const parentId = msg.parent_header.msg_id;
      this.#protocolError(
        new ProtocolError(
          `A ${msg.channel} ${String(msg.header.msg_type)} message from ${this.#opts.where} could not be handled: ${
            error instanceof Error ? error.message : String(error)
          }`,
          { cause: error, ...(typeof parentId === 'string' ? { parentMsgId: parentId } : {}) },
        ),
      );
    }
  }

  #tooLarge(size: number | undefined): void {
    const { maxFrameBytes, where } = this.#opts;
    const what = size === undefined ? 'a frame' : `a frame of ${size} bytes`;
    const error = new ProtocolError(
      `The channels WebSocket of ${where} received ${what}, more than maxFrameBytes (${maxFrameBytes}); it was dropped unread`,
    );
    try {
      this.#opts.onFrameTooLarge(error);
    } catch {
      // reported as far as it could be; the socket goes on
    }
  }

  #protocolError(error: ProtocolError): void {
    try {
      this.#opts.onProtocolError(error);
    } catch {
      // reported as far as it could be; the socket goes on
    }
  }

  #heard(): void {
    this.#lastHeardAt = this.#opts.clock.now();
    this.#pingSentAt = undefined;
  }

  #dropped(cause: unknown, hung = false): void {
    const socket = this.#socket;
    this.#socket = undefined;
    if (socket) {
      detach(socket);
      const terminate = (socket as unknown as { terminate?: () => void }).terminate;
      try {
        // A hung socket would never finish a closing handshake.
        if (hung && typeof terminate === 'function') terminate.call(socket);
        else socket.close();
      } catch {
        // already closed
      }
    }
    if (this.#closed || this.#reconnecting) return;
    void this.#reconnectLoop(cause);
  }

  async #reconnectLoop(cause: unknown): Promise<void> {
    const { attempts, initialDelayMs, maxDelayMs } = this.#opts.reconnect;
    this.#reconnecting = true;
    // With a journal, the kernel's iopub is read from it from the last message handed on.
    this.#feed?.start(this.#lastIopubId, this.#feedController.signal);
    let last: unknown = cause;
    for (let attempt = 1; attempt <= attempts; attempt++) {
      const delayMs = Math.min(maxDelayMs, initialDelayMs * 2 ** (attempt - 1));
      this.#opts.onReconnecting(attempt, delayMs, last);
      try {
        await sleep(delayMs, { clock: this.#opts.clock, signal: this.#closeController.signal });
        const socket = await this.#connect(
          this.#format,
          this.#closeController.signal,
          this.#opts.reconnect.attemptTimeoutMs,
        );
        if (this.#socket !== socket) {
          // Dropped again between its open event and here.
          last = new Error('the channels WebSocket closed right after it reopened');
          continue;
        }
        this.#reconnecting = false;
        this.#feed?.reopened();
        this.#flush();
        this.#opts.onReconnected();
        return;
      } catch (error) {
        if (this.#closed) return;
        last = error;
        if (GatewayAuthError.isInstance(error)) break;
      }
    }
    this.#reconnecting = false;
    if (this.#closed) return;
    this.close();
    this.#opts.onLost(
      new GatewayUnavailableError(
        `Lost the channels WebSocket of ${this.#opts.where} and could not reopen it after ${attempts} attempts`,
        { url: this.#opts.where, cause: last },
      ),
    );
  }

  /** Remembers a kernel message id for de-duplication; false when it was seen already. */
  #remember(id: string): boolean {
    if (this.#seen.has(id)) return false;
    const evicted = this.#ring[this.#ringAt];
    if (evicted !== undefined) this.#seen.delete(evicted);
    this.#ring[this.#ringAt] = id;
    this.#ringAt = (this.#ringAt + 1) % DEDUPE_WINDOW;
    this.#seen.add(id);
    return true;
  }

  #flush(): void {
    const queued = this.#queue;
    this.#queue = [];
    for (const msg of queued) this.send(msg);
  }

  /**
   * Opens a socket and attaches it synchronously in its `open` event, so frames the server sends right after the
   * upgrade (a replay) are not missed. With `timeoutMs` (> 0), a socket not open by then is closed and the attempt
   * fails with `GatewayUnavailableError`.
   */
  #connect(format: 'v1' | 'legacy', signal?: AbortSignal, timeoutMs = 0): Promise<WebSocket> {
    const { WebSocket: Impl, url, headers, where } = this.#opts;
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<WebSocket>((resolve, reject) => {
      let socket: WebSocket;
      try {
        socket = new Impl(url, format === 'v1' ? [V1_SUBPROTOCOL] : [], {
          headers,
          perMessageDeflate: false,
          maxPayload: this.#opts.maxFrameBytes,
        } as { headers: Record<string, string> });
      } catch (cause) {
        reject(new GatewayUnavailableError(`Could not open the channels WebSocket of ${where}`, { url: where, cause }));
        return;
      }
      if ((socket as { binaryType?: string }).binaryType !== 'nodebuffer') socket.binaryType = 'arraybuffer';
      let settled = false;
      const timer =
        timeoutMs > 0
          ? this.#opts.clock.setTimer(
              () =>
                finish(
                  new GatewayUnavailableError(
                    `The channels WebSocket of ${where} did not open within ${timeoutMs} ms (reconnect.attemptTimeoutMs)`,
                    { url: where },
                  ),
                ),
              timeoutMs,
            )
          : undefined;
      const finish = (error: unknown) => {
        if (settled) return;
        settled = true;
        timer?.cancel();
        signal?.removeEventListener('abort', onAbort);
        if (error === undefined) {
          detach(socket);
          // A server that accepted the upgrade without picking v1 speaks legacy.
          this.#format = format === 'v1' && socket.protocol === '' ? 'legacy' : format;
          this.#attach(socket);
          resolve(socket);
          return;
        }
        detach(socket);
        try {
          socket.close();
        } catch {
          // never opened
        }
        reject(error);
      };
      const onAbort = () => finish(signal?.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      socket.onopen = () => finish(undefined);
      socket.onerror = (event: Event) => finish(connectError(errorOf(event), where));
      socket.onclose = (event: CloseEvent) =>
        finish(
          new GatewayUnavailableError(
            `The channels WebSocket of ${where} closed before it opened (code ${event?.code ?? 'unknown'})`,
            { url: where },
          ),
        );
    });
  }
}

function detach(socket: WebSocket): void {
  socket.onopen = null;
  socket.onmessage = null;
  socket.onclose = null;
  socket.onerror = () => {};
}
