import { DefaultWebSocket, type WebSocketClass } from '@kernelwarden/gateway-client';
import { decodeFrame, type JupyterMessage, V1_SUBPROTOCOL, type WireFormat } from '@kernelwarden/jupyter-protocol';
import { parsePyJson } from './pyjson.js';

/** A message of a watched cell, as the kernel sent it (content read with Python's number types kept). */
export interface TappedMessage {
  channel: string;
  header: JupyterMessage['header'];
  parent_header: JupyterMessage['parent_header'];
  content: Record<string, unknown>;
}

/** Called with each message (iopub, and the shell `execute_reply`) of a watched cell, in arrival order. */
export type TapListener = (msg: TappedMessage) => void;

/**
 * Sees the raw messages of chosen cells on the kernels' channels WebSockets: what a `GatewayKernel`'s
 * `ExecuteResult` and `onOutput` leave out (`clear_output`, `update_display_data`, display ids, the kernel's own
 * timestamps). Give `tap.wrap()` to the `GatewayClient` the kernels are started with; `runNotebook({ tap })` then
 * builds its outputs from the messages.
 */
export interface MessageTap {
  /**
   * A WebSocket class for `new GatewayClient({ WebSocket })`: sockets of `Base` (default: gateway-client's
   * `DefaultWebSocket`, the `ws` package; pass a `LocalGateway` ticket's `WebSocket` to keep its guard) that also
   * report watched cells' messages. Sockets behave exactly as `Base`'s do.
   */
  wrap(Base?: WebSocketClass): WebSocketClass;
  /**
   * Reports the messages of the cell sent with `ExecuteOptions.cellId === cellId` (its `execute_request` metadata)
   * to `listener` until the returned function is called, and calls `onSent` when its `execute_request` goes out on
   * a socket. Watch before the cell is sent.
   */
  watch(cellId: string, listener: TapListener, onSent?: () => void): () => void;
  /** How many cells are watched now. */
  readonly watching: number;
}

type Socket = WebSocket & { protocol: string };

const utf8 = new TextDecoder('utf-8');

/** The content of a frame read with Python's number types kept (`1.0` stays a float). */
function exactContent(data: string | Uint8Array, format: WireFormat, fallback: Record<string, unknown>) {
  try {
    if (format === 'legacy') {
      if (typeof data !== 'string') return fallback;
      const whole = parsePyJson(data) as { content?: Record<string, unknown> };
      return whole.content ?? fallback;
    }
    const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const offset = (i: number) => view.getUint32(8 * (i + 1), true) + view.getUint32(8 * (i + 1) + 4, true) * 2 ** 32;
    const content = parsePyJson(utf8.decode(bytes.subarray(offset(4), offset(5))));
    return content !== null && typeof content === 'object' ? (content as Record<string, unknown>) : fallback;
  } catch {
    return fallback;
  }
}

function toBytes(data: unknown): string | Uint8Array | undefined {
  if (typeof data === 'string') return data;
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (Array.isArray(data) && data.every((d) => d instanceof Uint8Array)) return Buffer.concat(data);
  return undefined;
}

const OUTPUT_TYPES = new Set(['execute_result', 'display_data', 'update_display_data']);

const formatOf = (socket: Socket): WireFormat => (socket.protocol === V1_SUBPROTOCOL ? 'v1' : 'legacy');

/** The decoded Jupyter message of a frame, if it is one. */
function decodeMessage(frame: string | Uint8Array, format: WireFormat): JupyterMessage | undefined {
  try {
    return decodeFrame(frame, format);
  } catch {
    return undefined;
  }
}

/** The watched cells, and the `execute_request`s that sent them. */
class WatchedCells {
  /** cell id → listener */
  readonly #byCell = new Map<string, TapListener>();
  /** cell id → called when its request is sent */
  readonly #sent = new Map<string, () => void>();
  /** execute_request msg_id → cell id */
  readonly #byMsg = new Map<string, string>();

  get size(): number {
    return this.#byCell.size;
  }

  watch(cellId: string, listener: TapListener, onSent?: () => void): () => void {
    this.#byCell.set(cellId, listener);
    if (onSent) this.#sent.set(cellId, onSent);
    return () => {
      if (this.#byCell.get(cellId) !== listener) return;
      this.#byCell.delete(cellId);
      this.#sent.delete(cellId);
      for (const [msgId, id] of this.#byMsg) if (id === cellId) this.#byMsg.delete(msgId);
    };
  }

  /** A frame a socket sends: a watched cell's `execute_request` is remembered and its `onSent` called. */
  outgoing(socket: Socket, data: unknown): void {
    if (this.#byCell.size === 0) return;
    const frame = toBytes(data);
    if (frame === undefined) return;
    const msg = decodeMessage(frame, formatOf(socket));
    if (msg === undefined || msg.header.msg_type !== 'execute_request') return;
    const cellId = msg.metadata.cellId;
    if (typeof cellId === 'string' && this.#byCell.has(cellId)) {
      this.#byMsg.set(msg.header.msg_id, cellId);
      try {
        this.#sent.get(cellId)?.();
      } catch {
        // as for listeners
      }
    }
  }

  /** A frame a socket receives: a reply to a watched cell's request goes to its listener. */
  incoming(socket: Socket, data: unknown): void {
    if (this.#byMsg.size === 0) return;
    const frame = toBytes(data);
    if (frame === undefined) return;
    const format = formatOf(socket);
    const msg = decodeMessage(frame, format);
    if (msg === undefined) return;
    const parent = msg.parent_header.msg_id;
    if (typeof parent !== 'string') return;
    const cellId = this.#byMsg.get(parent);
    const listener = cellId === undefined ? undefined : this.#byCell.get(cellId);
    if (!listener) return;
    const content = OUTPUT_TYPES.has(msg.header.msg_type) ? exactContent(frame, format, msg.content) : msg.content;
    try {
      listener({ channel: msg.channel, header: msg.header, parent_header: msg.parent_header, content });
    } catch {
      // a throwing listener must not break the socket
    }
  }
}

/** A subclass of `Base` whose sockets report what they send and receive to `cells`. */
function tappedWebSocketClass(Base: WebSocketClass, cells: WatchedCells): WebSocketClass {
  const BaseClass = Base as unknown as new (...args: unknown[]) => object;
  const proto = BaseClass.prototype as object;
  // Accessors and methods are looked up on the base's prototype chain at call time: `DefaultWebSocket` links
  // its prototype to the `ws` package's only when the first socket is made.
  class TappedWebSocket extends BaseClass {
    send(data: unknown, ...rest: unknown[]): void {
      cells.outgoing(this as unknown as Socket, data);
      Reflect.apply(Reflect.get(proto, 'send', this) as (...args: unknown[]) => void, this, [data, ...rest]);
    }
    get onmessage(): unknown {
      return Reflect.get(proto, 'onmessage', this);
    }
    set onmessage(handler: unknown) {
      const socket = this as unknown as Socket;
      const wrapped =
        typeof handler === 'function'
          ? (event: MessageEvent) => {
              cells.incoming(socket, event.data);
              return (handler as (event: MessageEvent) => unknown).call(socket, event);
            }
          : handler;
      Reflect.set(proto, 'onmessage', wrapped, this);
    }
  }
  return TappedWebSocket as unknown as WebSocketClass;
}

/** Makes a `MessageTap` (see there). */
export function createMessageTap(): MessageTap {
  const cells = new WatchedCells();
  return {
    get watching() {
      return cells.size;
    },
    watch(cellId, listener, onSent) {
      return cells.watch(cellId, listener, onSent);
    },
    wrap(Base = DefaultWebSocket as unknown as WebSocketClass) {
      return tappedWebSocketClass(Base, cells);
    },
  };
}
