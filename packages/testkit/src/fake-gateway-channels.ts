import { decodeFrame, encodeFrame, type JupyterMessage, type WireFormat } from '@kernelwarden/jupyter-protocol';
import type { RawData, WebSocket } from 'ws';
import { toBytes } from './fake-gateway-http.js';
import type { RecordedFrame } from './fake-gateway-types.js';
import type { FakeKernel } from './fake-kernel.js';

interface Connection {
  readonly ws: WebSocket;
  readonly kernel: FakeKernel;
  readonly sessionId: string | undefined;
  readonly format: WireFormat;
  open: boolean;
  /** Messages held back until the replay of the buffered ones has run, so order is kept. */
  held?: { message: JupyterMessage; replayed: boolean }[];
}

/**
 * FakeGateway's channels sockets, as jupyter_server keeps them: each open socket of a kernel gets the kernel's
 * messages (iopub to all, replies to their session), what a kernel sends while no socket is open is buffered and
 * replayed to a reconnect of the same session, and every frame both ways is recorded. It also carries out
 * `dropChannelsAfter()`.
 */
export class FakeChannels {
  readonly #connections = new Set<Connection>();
  readonly #buffers = new Map<string, { sessionId: string | undefined; messages: JupyterMessage[] }>();
  readonly #frames: RecordedFrame[];
  readonly #closed: () => boolean;
  #drop: { remaining: number; kernelId: string | undefined; lose: number } | undefined;
  /** Per kernel: how many more of its messages are lost (see `dropAfter`'s `lose`). */
  readonly #losing = new Map<string, number>();

  constructor(frames: RecordedFrame[], closed: () => boolean) {
    this.#frames = frames;
    this.#closed = closed;
  }

  /** Open channels sockets of kernel `kernelId`. */
  count(kernelId: string): number {
    let n = 0;
    for (const c of this.#connections) if (c.open && c.kernel.id === kernelId) n++;
    return n;
  }

  /** Takes over an upgraded socket: frames in go to the kernel, and a buffer left for its session is replayed. */
  attach(ws: WebSocket, kernel: FakeKernel, sessionId: string | undefined, format: WireFormat): void {
    const conn: Connection = { ws, kernel, sessionId, format, open: true };
    this.#connections.add(conn);
    ws.on('message', (data, isBinary) => this.#onFrame(conn, data, isBinary));
    ws.on('close', () => this.#close(conn));
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
  }

  /** The kernel was deleted: its buffer goes, and its sockets are closed. */
  forget(kernel: FakeKernel): void {
    this.#buffers.delete(kernel.id);
    for (const c of [...this.#connections]) if (c.kernel === kernel) this.#close(c, 1000);
  }

  /** See `FakeGateway.dropChannelsAfter()`. */
  dropAfter(messages: number, kernelId: string | undefined, lose = 0): void {
    this.#drop = { remaining: Math.max(0, messages), kernelId, lose: Math.max(0, lose) };
    if (this.#drop.remaining === 0) {
      for (const c of [...this.#connections]) if (!kernelId || c.kernel.id === kernelId) this.#cut(c, lose);
      this.#drop = undefined;
    }
  }

  /** Terminates every socket (the gateway is closing). */
  terminateAll(): void {
    for (const c of this.#connections) c.ws.terminate();
    this.#connections.clear();
  }

  /** A message of `kernel` for its sockets (a reply only to `toSession`'s), or for its buffer when none is open. */
  deliver(kernel: FakeKernel, msg: JupyterMessage, toSession: string | undefined): void {
    const losing = this.#losing.get(kernel.id);
    if (losing !== undefined) {
      if (losing <= 1) this.#losing.delete(kernel.id);
      else this.#losing.set(kernel.id, losing - 1);
      return;
    }
    const targets = [...this.#connections].filter(
      (c) =>
        c.open &&
        c.kernel === kernel &&
        (msg.channel === 'iopub' || toSession === undefined || c.sessionId === toSession),
    );
    if (!targets.length) {
      if (this.count(kernel.id) === 0) this.#buffers.get(kernel.id)?.messages.push(msg);
      return;
    }
    for (const conn of targets) {
      if (conn.held) conn.held.push({ message: msg, replayed: false });
      else this.#send(conn, msg, false);
    }
  }

  /** Bytes or text a script sends as they are, to every open socket of `kernel`. */
  deliverRaw(kernel: FakeKernel, data: string | Uint8Array): void {
    for (const conn of [...this.#connections]) {
      if (!conn.open || conn.kernel !== kernel) continue;
      this.#frames.push({
        direction: 'out',
        kernelId: kernel.id,
        sessionId: conn.sessionId,
        format: conn.format,
        raw: data,
      });
      conn.ws.send(data, { binary: typeof data !== 'string' });
    }
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
    this.#frames.push(frame);
    try {
      const message = decodeFrame(typeof raw === 'string' ? raw : new Uint8Array(raw), conn.format);
      frame.message = message;
      conn.kernel.receive(message, conn.sessionId);
    } catch (error) {
      frame.error = (error as Error).message; // jupyter_server logs and ignores a frame it cannot read
    }
  }

  #close(conn: Connection, code?: number): void {
    if (!conn.open && !this.#connections.has(conn)) return;
    const wasOpen = conn.open;
    conn.open = false;
    this.#connections.delete(conn);
    if (code !== undefined) conn.ws.close(code);
    if (wasOpen && conn.kernel.alive && this.count(conn.kernel.id) === 0 && !this.#closed()) {
      this.#buffers.set(conn.kernel.id, { sessionId: conn.sessionId, messages: [] });
    }
  }

  #terminate(conn: Connection): void {
    this.#close(conn);
    conn.ws.terminate();
  }

  #send(conn: Connection, msg: JupyterMessage, replayed: boolean): void {
    if (!conn.open) return;
    const raw = encodeFrame(msg, conn.format);
    this.#frames.push({
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
      this.#cut(conn, drop.lose);
    }
  }

  #cut(conn: Connection, lose: number): void {
    if (lose > 0) this.#losing.set(conn.kernel.id, lose);
    this.#terminate(conn);
  }
}
