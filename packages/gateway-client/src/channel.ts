import { sleep } from '@kernelwarden/core';
import { encodeFrame, type JupyterMessage } from '@kernelwarden/jupyter-protocol';
import {
  type ChannelHandlers,
  type ChannelSettings,
  channelOptions,
  type KernelChannelOptions,
  type ReconnectPolicy,
  type WireProtocol,
} from './channel-options.js';
import { detach, discardSocket, openSocket, socketPinger, socketPonger } from './channel-socket.js';
import { GatewayAuthError, GatewayUnavailableError, ProtocolError } from './errors.js';
import { toBytes } from './frame-bytes.js';
import type { GatewayClient } from './gateway-client.js';
import { JournalFeed } from './journal-feed.js';
import { RecentIds } from './recent-ids.js';
import { errorOf } from './socket-errors.js';
import { decodeFrame } from './wire.js';

export type { KernelChannelOptions, ReconnectPolicy, WireProtocol };

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
  #seen = new RecentIds();
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
        if (this.#seen.remember(msg.header.msg_id)) this.#deliver(msg);
      },
      delivered: (id) => this.#seen.has(id),
      quiet: () => this.#opts.quiet?.() ?? true,
      socketOpen: () => this.isOpen,
      onCaughtUp: () => this.#opts.onJournalResumed?.(),
      onLost: (lost) => this.#opts.onJournalLost?.(lost),
      onMissed: () => this.#opts.onJournalMissed?.(),
      onUnavailable: () => {},
    });
  }

  /** The channels socket of kernel `kernelId` on `client`'s gateway, under `sessionId`. */
  static forKernel(
    client: GatewayClient,
    kernelId: string,
    sessionId: string,
    opts: ChannelSettings,
    handlers: ChannelHandlers,
  ): KernelChannel {
    return new KernelChannel(channelOptions(client, kernelId, sessionId, opts, handlers));
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
  }

  /** The negotiated wire format. */
  get format(): 'v1' | 'legacy' {
    return this.#format;
  }

  /** True while the socket is open (not while reconnecting or after close). */
  get isOpen(): boolean {
    return !this.#closed && !this.#reconnecting && this.#socket?.readyState === OPEN;
  }

  /**
   * True while kernel iopub messages the socket delivered wait for the journal to hand them on (see
   * `JournalFeed.holding`): they are not lost, however silent the socket is.
   */
  get holdingForJournal(): boolean {
    return this.#feed?.holding ?? false;
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
    if (socket) discardSocket(socket, false);
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
    if (old) discardSocket(old, false);
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
    this.#ping = socketPinger(socket, () => {
      if (this.#socket === socket) this.#heard();
    });
    this.#pong = socketPonger(socket);
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
      if (msg.channel === 'iopub' && this.#feed?.active && !serverStatus(msg)) {
        // The journal hands the kernel's iopub on meanwhile; the socket's copy only says how far the socket got.
        this.#feed.socketDelivered(id, msg);
        this.received++;
        this.#heard();
        return;
      }
      this.#seen.remember(id);
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
    if (socket) discardSocket(socket, hung);
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
    const opened = (socket: WebSocket, negotiated: 'v1' | 'legacy') => {
      this.#format = negotiated;
      this.#attach(socket);
    };
    return openSocket(this.#opts, format, opened, signal, timeoutMs);
  }
}

/**
 * A `status` the server itself sends on iopub (`restarting`, `dead`): never in the journal (it is not the kernel's), so
 * it is handed on from the socket even while the journal is the source of the kernel's iopub.
 */
function serverStatus(msg: JupyterMessage): boolean {
  if (msg.header.msg_type !== 'status') return false;
  const state = (msg.content as { execution_state?: unknown } | undefined)?.execution_state;
  return state === 'restarting' || state === 'dead';
}
