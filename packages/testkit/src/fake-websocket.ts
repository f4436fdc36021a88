/** Data a `FakeWebSocket` can send or receive. */
export type FakeWebSocketData = string | ArrayBufferLike | ArrayBufferView | Blob;

/** Options of `FakeWebSocket.open()`. */
export interface FakeWebSocketOpenOptions {
  /** The subprotocol the "server" picked. @defaultValue `FakeWebSocket.selectProtocol(offered)` */
  protocol?: string;
}

type Handler<E extends Event> = ((event: E) => void) | null;

/** The close event a `FakeWebSocket` dispatches (Node 20 has no global `CloseEvent`). */
export interface FakeCloseEvent extends Event {
  readonly code: number;
  readonly reason: string;
  readonly wasClean: boolean;
}

/** The error event a `FakeWebSocket` dispatches. */
export interface FakeErrorEvent extends Event {
  readonly error: unknown;
  readonly message: string;
}

/**
 * A WebSocket stand-in constructible like the WHATWG `WebSocket` (`new FakeWebSocket(url, protocols?, options?)`):
 * it opens on its own in a microtask, records what is sent, and lets the test deliver messages, close or fail it.
 * Every instance is kept in `FakeWebSocket.instances`.
 *
 * Use it for client code that takes a WebSocket class, when no real server is needed; for a real wire, use FakeGateway.
 */
export class FakeWebSocket extends EventTarget {
  static readonly CONNECTING = 0;
  static readonly OPEN = 1;
  static readonly CLOSING = 2;
  static readonly CLOSED = 3;
  readonly CONNECTING = 0;
  readonly OPEN = 1;
  readonly CLOSING = 2;
  readonly CLOSED = 3;

  /** Every instance created since the last `FakeWebSocket.reset()`, in creation order. */
  static instances: FakeWebSocket[] = [];
  /** When true, new sockets open by themselves in a microtask; set false to call `open()`/`fail()` by hand. */
  static autoOpen = true;
  /** Picks the subprotocol of a socket that opens by itself. @defaultValue the first offered, or '' */
  static selectProtocol: (offered: readonly string[]) => string = (offered) => offered[0] ?? '';

  /** Clears `instances` and restores `autoOpen` and `selectProtocol` to their defaults. */
  static reset(): void {
    FakeWebSocket.instances = [];
    FakeWebSocket.autoOpen = true;
    FakeWebSocket.selectProtocol = (offered) => offered[0] ?? '';
  }

  readonly url: string;
  /** The subprotocols the client offered. */
  readonly protocols: readonly string[];
  /** The third constructor argument (the `ws` package's options: headers, …). */
  readonly options: unknown;
  readyState: number = FakeWebSocket.CONNECTING;
  binaryType: 'blob' | 'arraybuffer' | 'nodebuffer' = 'blob';
  /** The selected subprotocol; '' until open. */
  protocol = '';
  extensions = '';
  bufferedAmount = 0;
  /** Every frame the client sent while open, as given. */
  readonly sent: FakeWebSocketData[] = [];
  /** The close code and reason once closed. */
  closeInfo: { code: number; reason: string; wasClean: boolean; byClient: boolean } | undefined;

  onopen: Handler<Event> = null;
  onmessage: Handler<MessageEvent> = null;
  onclose: Handler<FakeCloseEvent> = null;
  onerror: Handler<FakeErrorEvent> = null;

  constructor(url: string | URL, protocols?: string | string[], options?: unknown) {
    super();
    this.url = String(url);
    this.protocols = protocols === undefined ? [] : typeof protocols === 'string' ? [protocols] : [...protocols];
    this.options = options;
    FakeWebSocket.instances.push(this);
    if (FakeWebSocket.autoOpen) {
      queueMicrotask(() => {
        if (this.readyState === FakeWebSocket.CONNECTING) this.open();
      });
    }
  }

  /** Client side: records a frame. Throws `InvalidStateError` while connecting; ignored once closing or closed. */
  send(data: FakeWebSocketData): void {
    if (this.readyState === FakeWebSocket.CONNECTING) {
      throw new DOMException('WebSocket is not open: readyState 0 (CONNECTING)', 'InvalidStateError');
    }
    if (this.readyState !== FakeWebSocket.OPEN) return;
    this.sent.push(data);
  }

  /** Client side: closes the socket; `readyState` becomes CLOSED at once and `close` fires in a microtask. */
  close(code = 1000, reason = ''): void {
    if (this.readyState === FakeWebSocket.CLOSED || this.readyState === FakeWebSocket.CLOSING) return;
    this.#finish({ code, reason, wasClean: true, byClient: true });
  }

  /** Test side: completes the handshake (`open` fires) with the given or selected subprotocol. */
  open(opts: FakeWebSocketOpenOptions = {}): void {
    if (this.readyState !== FakeWebSocket.CONNECTING) throw new Error('FakeWebSocket.open(): socket is not connecting');
    this.protocol = opts.protocol ?? FakeWebSocket.selectProtocol(this.protocols);
    this.readyState = FakeWebSocket.OPEN;
    this.#emit(new Event('open'), this.onopen);
  }

  /** Test side: delivers a frame from the "server"; binary data is converted to match `binaryType`. */
  receive(data: string | ArrayBuffer | ArrayBufferView): void {
    if (this.readyState !== FakeWebSocket.OPEN) throw new Error('FakeWebSocket.receive(): socket is not open');
    const event = new MessageEvent('message', { data: this.#convert(data) });
    this.#emit(event, this.onmessage);
  }

  /** Test side: the "server" closes the socket (code 1006 = dropped without a close frame). */
  serverClose(code = 1006, reason = ''): void {
    if (this.readyState === FakeWebSocket.CLOSED) return;
    this.#finish({ code, reason, wasClean: code !== 1006, byClient: false });
  }

  /** Test side: fails the socket: `error` fires, then `close` with code 1006 (as a refused handshake or reset does). */
  fail(error: unknown = new Error('FakeWebSocket failed')): void {
    if (this.readyState === FakeWebSocket.CLOSED) return;
    const message = error instanceof Error ? error.message : String(error);
    this.#emit(Object.assign(new Event('error'), { error, message }) as FakeErrorEvent, this.onerror);
    this.#finish({ code: 1006, reason: '', wasClean: false, byClient: false });
  }

  /** The sent frames that are strings, parsed as JSON (the legacy Jupyter wire format). */
  sentJson(): unknown[] {
    return this.sent.filter((d): d is string => typeof d === 'string').map((d) => JSON.parse(d) as unknown);
  }

  #finish(info: { code: number; reason: string; wasClean: boolean; byClient: boolean }): void {
    this.readyState = FakeWebSocket.CLOSED;
    this.closeInfo = info;
    const event = Object.assign(new Event('close'), {
      code: info.code,
      reason: info.reason,
      wasClean: info.wasClean,
    }) as FakeCloseEvent;
    queueMicrotask(() => this.#emit(event, this.onclose));
  }

  #emit<E extends Event>(event: E, handler: Handler<E>): void {
    handler?.call(this, event);
    this.dispatchEvent(event);
  }

  #convert(data: string | ArrayBuffer | ArrayBufferView): unknown {
    if (typeof data === 'string') return data;
    const bytes = ArrayBuffer.isView(data)
      ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
      : new Uint8Array(data);
    if (this.binaryType === 'nodebuffer') return Buffer.from(bytes);
    const copy = bytes.slice().buffer;
    if (this.binaryType === 'arraybuffer') return copy;
    return new Blob([copy]);
  }
}
