// The floor of a gateway client: a hand-written `ws` exchange in the v1 kernel WebSocket protocol, with nothing but
// what a round trip needs (create over REST, one socket, kernel_info handshake, execute, interrupt, delete).
// With `pong: true` it also sends an unsolicited WebSocket pong after every message it receives while a request is
// pending, which makes its TCP ACK ride on a data segment at once and removes jupyter-server 1.23's Nagle /
// delayed-ACK stall from the client's side (RFC 6455 §5.5.3 allows unsolicited pongs).
import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';

const V1 = 'v1.kernel.websocket.jupyter.org';
const EMPTY = Buffer.from('{}');

/** Frames `[header, parent_header, metadata, content]` for `channel` exactly as jupyter_server's v1 decoder reads them. */
function encodeV1(channel, parts) {
  const channelBytes = Buffer.from(channel);
  const count = parts.length + 2;
  const head = Buffer.alloc(8 * (1 + count));
  head.writeBigUInt64LE(BigInt(count), 0);
  let offset = head.length;
  head.writeBigUInt64LE(BigInt(offset), 8);
  offset += channelBytes.length;
  head.writeBigUInt64LE(BigInt(offset), 16);
  parts.forEach((part, i) => {
    offset += part.length;
    head.writeBigUInt64LE(BigInt(offset), 8 * (i + 3));
  });
  return Buffer.concat([head, channelBytes, ...parts]);
}

/** Splits a v1 frame into its channel and raw parts (header, parent_header, metadata, content, buffers…). */
function decodeV1(buf) {
  const count = Number(buf.readBigUInt64LE(0));
  const offsets = [];
  for (let i = 0; i < count; i++) offsets.push(Number(buf.readBigUInt64LE(8 * (i + 1))));
  const channel = buf.toString('utf8', offsets[0], offsets[1]);
  const parts = [];
  for (let i = 1; i < count - 1; i++) parts.push(buf.subarray(offsets[i], offsets[i + 1]));
  return { channel, parts };
}

export class MinimalClient {
  #baseUrl;
  #token;
  #pong;
  #session = randomUUID();
  #ws;
  #pending = new Map();
  kernelId;

  constructor({ baseUrl, token, pong = false }) {
    this.#baseUrl = baseUrl;
    this.#token = token;
    this.#pong = pong;
  }

  /** Creates a python3 kernel, opens its channels and waits for the first kernel_info_reply. */
  static async start(opts) {
    const client = new MinimalClient(opts);
    await client.#start(opts.kernelName ?? 'python3');
    return client;
  }

  async #rest(method, path, body) {
    const res = await fetch(`${this.#baseUrl}${path}`, {
      method,
      headers: { Authorization: `token ${this.#token}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!res.ok && res.status !== 404) throw new Error(`${method} ${path}: HTTP ${res.status}`);
    return res.status === 204 ? undefined : res.json().catch(() => undefined);
  }

  async #start(kernelName) {
    const model = await this.#rest('POST', '/api/kernels', { name: kernelName });
    this.kernelId = model.id;
    const url = `${this.#baseUrl.replace(/^http/, 'ws')}/api/kernels/${this.kernelId}/channels?session_id=${this.#session}`;
    this.#ws = new WebSocket(url, [V1], { headers: { Authorization: `token ${this.#token}` } });
    this.#ws.binaryType = 'nodebuffer';
    this.#ws.on('message', (data) => this.#receive(data));
    this.#ws.on('close', () => this.#failAll(new Error('kernel socket closed')));
    await new Promise((resolve, reject) => {
      this.#ws.once('open', resolve);
      this.#ws.once('error', reject);
    });
    if (this.#ws.protocol !== V1) throw new Error(`server did not accept ${V1}`);
    // Retry kernel_info until the first reply (ZMQ's slow joiner can drop the first request).
    for (let attempt = 0; ; attempt++) {
      const reply = this.#request('shell', 'kernel_info_request', {}, { wantIdle: false });
      const timeout = new Promise((resolve) => setTimeout(resolve, 1000, 'timeout'));
      if ((await Promise.race([reply, timeout])) !== 'timeout') return;
      if (attempt > 30) throw new Error('no kernel_info_reply');
    }
  }

  #request(channel, msgType, content, { wantIdle = true, onText } = {}) {
    const msgId = randomUUID();
    const header = {
      msg_id: msgId,
      username: 'bench',
      session: this.#session,
      date: new Date().toISOString(),
      msg_type: msgType,
      version: '5.3',
    };
    const frame = encodeV1(channel, [
      Buffer.from(JSON.stringify(header)),
      EMPTY,
      EMPTY,
      Buffer.from(JSON.stringify(content)),
    ]);
    return new Promise((resolve, reject) => {
      this.#pending.set(msgId, { resolve, reject, reply: undefined, idle: !wantIdle, onText });
      this.#ws.send(frame);
    });
  }

  #receive(data) {
    if (this.#pong && this.#pending.size > 0) this.#ws.pong();
    const { channel, parts } = decodeV1(data);
    const parent = JSON.parse(parts[1]);
    const pending = this.#pending.get(parent.msg_id);
    if (!pending) return;
    const header = JSON.parse(parts[0]);
    if (channel === 'iopub') {
      if (header.msg_type === 'stream') {
        if (pending.onText) {
          const content = JSON.parse(parts[3]);
          pending.onText(content.text, content.name);
        }
      } else if (header.msg_type === 'status' && JSON.parse(parts[3]).execution_state === 'idle') {
        pending.idle = true;
      }
    } else if (channel === 'shell' && header.msg_type.endsWith('_reply')) {
      pending.reply = JSON.parse(parts[3]);
    }
    if (pending.reply && pending.idle) {
      this.#pending.delete(parent.msg_id);
      pending.resolve(pending.reply);
    }
  }

  #failAll(error) {
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
  }

  /** Executes `code`; settles once both execute_reply and status idle arrived. `onText(text, name)` gets every stream chunk. */
  async run(code, { onText } = {}) {
    const content = {
      code,
      silent: false,
      store_history: true,
      user_expressions: {},
      allow_stdin: false,
      stop_on_error: false,
    };
    const reply = await this.#request('shell', 'execute_request', content, { onText });
    return { status: reply.status };
  }

  async interrupt() {
    await this.#rest('POST', `/api/kernels/${this.kernelId}/interrupt`);
  }

  async close() {
    this.#ws?.close();
    if (this.kernelId) await this.#rest('DELETE', `/api/kernels/${this.kernelId}`);
  }
}
