import { KernelwardenError } from '@kernelwarden/core';

/** The header of a Jupyter message. */
export interface JupyterHeader {
  msg_id: string;
  msg_type: string;
  session: string;
  username: string;
  date: string;
  version: string;
  [key: string]: unknown;
}

/** One Jupyter message as it travels on the channels WebSocket. */
export interface JupyterMessage {
  /** `shell`, `iopub`, `stdin` or `control`. */
  channel: string;
  header: JupyterHeader;
  /** The header of the request this message answers; `{}` for none. */
  parent_header: Partial<JupyterHeader>;
  metadata: Record<string, unknown>;
  content: Record<string, unknown>;
  buffers?: Uint8Array[];
}

/** The two channel wire formats: the `v1.kernel.websocket.jupyter.org` subprotocol, or the legacy JSON format. */
export type WireFormat = 'v1' | 'legacy';

/** The WebSocket subprotocol of the v1 wire format. */
export const V1_SUBPROTOCOL = 'v1.kernel.websocket.jupyter.org';

/**
 * A frame could not be decoded: wrong framing, bad offsets or invalid JSON (code `WIRE_FORMAT`).
 *
 * Thrown by `decodeFrame()`; FakeGateway records it on the frame instead of throwing.
 */
export class WireFormatError extends KernelwardenError {
  static override readonly brand: string = 'WireFormatError';
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, { code: 'WIRE_FORMAT', cause: options.cause });
  }
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * Encodes a message as the server sends it: v1 is always binary; legacy is a JSON text frame, or the legacy binary
 * framing (big-endian uint32 offsets) when the message carries buffers.
 *
 * Use it to build frames by hand, e.g. to feed a client a message that a script cannot produce.
 */
export function encodeFrame(msg: JupyterMessage, format: WireFormat): string | Uint8Array {
  return format === 'v1' ? encodeV1(msg) : encodeLegacy(msg);
}

/**
 * Decodes a frame in the given format; throws `WireFormatError` when the framing or the JSON is broken.
 *
 * Use it to read the frames FakeGateway recorded, or frames a client sent.
 */
export function decodeFrame(data: string | Uint8Array, format: WireFormat): JupyterMessage {
  return format === 'v1' ? decodeV1(asBytes(data)) : decodeLegacy(data);
}

function encodeV1(msg: JupyterMessage): Uint8Array {
  const parts = [
    encoder.encode(msg.channel),
    encoder.encode(JSON.stringify(msg.header)),
    encoder.encode(JSON.stringify(msg.parent_header)),
    encoder.encode(JSON.stringify(msg.metadata)),
    encoder.encode(JSON.stringify(msg.content)),
    ...(msg.buffers ?? []),
  ];
  // Offsets of every part's start, plus the end of the last one (as jupyter_server's serialize_msg_to_ws_v1).
  const count = parts.length + 1;
  const offsets: number[] = [8 * (count + 1)];
  for (const part of parts) offsets.push((offsets.at(-1) as number) + part.byteLength);
  const out = new Uint8Array(offsets.at(-1) as number);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(count), true);
  for (const [i, offset] of offsets.entries()) view.setBigUint64(8 * (i + 1), BigInt(offset), true);
  for (const [i, part] of parts.entries()) out.set(part, offsets[i] as number);
  return out;
}

function decodeV1(bytes: Uint8Array): JupyterMessage {
  if (bytes.byteLength < 8) throw new WireFormatError(`v1 frame too short (${bytes.byteLength} bytes)`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const count = Number(view.getBigUint64(0, true));
  if (count < 6 || 8 * (count + 1) > bytes.byteLength)
    throw new WireFormatError(`v1 frame has a bad offset count (${count})`);
  const offsets: number[] = [];
  for (let i = 0; i < count; i++) offsets.push(Number(view.getBigUint64(8 * (i + 1), true)));
  for (let i = 0; i < count; i++) {
    const o = offsets[i] as number;
    if (o > bytes.byteLength || (i > 0 && o < (offsets[i - 1] as number))) {
      throw new WireFormatError(`v1 frame has a bad offset table`);
    }
  }
  const part = (i: number) => bytes.subarray(offsets[i] as number, offsets[i + 1] as number);
  const buffers: Uint8Array[] = [];
  for (let i = 5; i < count - 1; i++) buffers.push(part(i).slice());
  return {
    channel: text(part(0)),
    header: json(part(1)) as JupyterHeader,
    parent_header: json(part(2)) as Partial<JupyterHeader>,
    metadata: json(part(3)) as Record<string, unknown>,
    content: json(part(4)) as Record<string, unknown>,
    ...(buffers.length ? { buffers } : {}),
  };
}

function encodeLegacy(msg: JupyterMessage): string | Uint8Array {
  const body = {
    header: msg.header,
    msg_id: msg.header.msg_id,
    msg_type: msg.header.msg_type,
    parent_header: msg.parent_header,
    metadata: msg.metadata,
    content: msg.content,
    buffers: [] as unknown[],
    channel: msg.channel,
  };
  const buffers = msg.buffers ?? [];
  if (!buffers.length) return JSON.stringify(body);
  const { buffers: _omit, ...withoutBuffers } = body;
  const parts = [encoder.encode(JSON.stringify(withoutBuffers)), ...buffers];
  const n = parts.length;
  const offsets: number[] = [4 * (n + 1)];
  for (const p of parts.slice(0, -1)) offsets.push((offsets.at(-1) as number) + p.byteLength);
  const total = (offsets.at(-1) as number) + (parts.at(-1) as Uint8Array).byteLength;
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  view.setUint32(0, n, false);
  for (const [i, offset] of offsets.entries()) view.setUint32(4 * (i + 1), offset, false);
  for (const [i, p] of parts.entries()) out.set(p, offsets[i] as number);
  return out;
}

function decodeLegacy(data: string | Uint8Array): JupyterMessage {
  let body: Record<string, unknown>;
  let buffers: Uint8Array[] = [];
  if (typeof data === 'string') {
    body = parseJson(data) as Record<string, unknown>;
  } else {
    if (data.byteLength < 4) throw new WireFormatError(`legacy binary frame too short (${data.byteLength} bytes)`);
    const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
    const n = view.getUint32(0, false);
    if (n < 1 || 4 * (n + 1) > data.byteLength) throw new WireFormatError(`legacy binary frame has a bad count (${n})`);
    const offsets: number[] = [];
    for (let i = 0; i < n; i++) offsets.push(view.getUint32(4 * (i + 1), false));
    offsets.push(data.byteLength);
    for (let i = 0; i < n; i++) {
      if ((offsets[i] as number) > (offsets[i + 1] as number))
        throw new WireFormatError('legacy binary frame has bad offsets');
    }
    const parts = offsets.slice(0, -1).map((start, i) => data.subarray(start, offsets[i + 1]));
    body = json(parts[0] as Uint8Array) as Record<string, unknown>;
    buffers = parts.slice(1).map((p) => p.slice());
  }
  if (body === null || typeof body !== 'object' || typeof body.header !== 'object' || body.header === null) {
    throw new WireFormatError('legacy frame is not a Jupyter message (no header)');
  }
  return {
    channel: String(body.channel ?? ''),
    header: body.header as JupyterHeader,
    parent_header: (body.parent_header ?? {}) as Partial<JupyterHeader>,
    metadata: (body.metadata ?? {}) as Record<string, unknown>,
    content: (body.content ?? {}) as Record<string, unknown>,
    ...(buffers.length ? { buffers } : {}),
  };
}

function asBytes(data: string | Uint8Array): Uint8Array {
  return typeof data === 'string' ? encoder.encode(data) : data;
}

function text(bytes: Uint8Array): string {
  try {
    return decoder.decode(bytes);
  } catch (cause) {
    throw new WireFormatError('frame part is not valid UTF-8', { cause });
  }
}

function json(bytes: Uint8Array): unknown {
  return parseJson(text(bytes));
}

function parseJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch (cause) {
    throw new WireFormatError('frame part is not valid JSON', { cause });
  }
}
