import { WireFormatError } from './errors.js';
import type { JupyterMessage, OutgoingMessage } from './message.js';
import { checkedMessage, type DecodeLimits, maxBuffersOf } from './message-shape.js';

/**
 * The legacy (no subprotocol) format, as jupyter_server's `serialize_binary_message` /
 * `deserialize_binary_message` define it: a JSON text frame holding the whole message (with its `channel`) when it
 * has no buffers; otherwise a binary frame — a big-endian uint32 count `n` of parts, `n` big-endian uint32 offsets
 * (from the frame's start), then the JSON of the message without buffers, then each buffer.
 */
const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * Encodes a message as one legacy frame: a string (text frame) without buffers, bytes (binary frame) with them. The
 * JSON carries `msg_id` and `msg_type` beside the header, as jupyter_server writes it; servers ignore them.
 */
export function encodeLegacy(msg: OutgoingMessage): string | Uint8Array {
  const buffers = msg.buffers ?? [];
  const body = {
    header: msg.header,
    msg_id: msg.header.msg_id,
    msg_type: msg.header.msg_type,
    parent_header: msg.parent_header,
    metadata: msg.metadata,
    content: msg.content,
    ...(buffers.length === 0 ? { buffers: [] } : {}),
    channel: msg.channel,
  };
  const json = JSON.stringify(body);
  if (buffers.length === 0) return json;
  const parts = [encoder.encode(json), ...buffers];
  const headerSize = 4 * (parts.length + 1);
  let total = headerSize;
  for (const part of parts) total += part.byteLength;
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  view.setUint32(0, parts.length, false);
  let offset = headerSize;
  parts.forEach((part, i) => {
    view.setUint32(4 * (i + 1), offset, false);
    out.set(part, offset);
    offset += part.byteLength;
  });
  return out;
}

/**
 * Decodes one legacy frame (text or binary); throws `WireFormatError` when it is malformed: framing, JSON, a part of
 * the wrong shape (see `JupyterMessage`; a part left out counts as `{}`), or more than `limits.maxBuffers` buffers.
 */
export function decodeLegacy(frame: string | Uint8Array, limits?: DecodeLimits): JupyterMessage {
  if (typeof frame === 'string') return fromJson(frame, []);
  if (frame.byteLength < 4) throw new WireFormatError(`legacy binary frame too short (${frame.byteLength} bytes)`);
  const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  const count = view.getUint32(0, false);
  if (count < 1 || 4 * (count + 1) > frame.byteLength) {
    throw new WireFormatError(`legacy binary frame declares ${count} parts in ${frame.byteLength} bytes`);
  }
  const maxBuffers = maxBuffersOf(limits);
  if (count - 1 > maxBuffers) {
    throw new WireFormatError(`legacy binary frame declares ${count - 1} buffers, more than the ${maxBuffers} allowed`);
  }
  const offsets: number[] = [];
  let previous = 4 * (count + 1);
  for (let i = 0; i < count; i++) {
    const value = view.getUint32(4 * (i + 1), false);
    if (value < previous || value > frame.byteLength) {
      throw new WireFormatError(`legacy binary frame offset ${i} (${value}) is out of order or past the frame's end`);
    }
    offsets.push(value);
    previous = value;
  }
  offsets.push(frame.byteLength);
  let json: string;
  try {
    json = decoder.decode(frame.subarray(offsets[0]!, offsets[1]!));
  } catch (cause) {
    throw new WireFormatError('legacy binary frame has a message part that is not valid UTF-8', { cause });
  }
  const buffers: Uint8Array[] = [];
  for (let i = 1; i < count; i++) buffers.push(frame.slice(offsets[i]!, offsets[i + 1]!));
  return fromJson(json, buffers);
}

function fromJson(json: string, buffers: Uint8Array[]): JupyterMessage {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (cause) {
    throw new WireFormatError('legacy frame is not valid JSON', { cause });
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new WireFormatError('legacy frame is not a JSON object');
  }
  const msg = raw as Record<string, unknown>;
  return checkedMessage(
    'legacy frame',
    msg.channel,
    msg.header,
    msg.parent_header === undefined ? {} : msg.parent_header,
    msg.metadata === undefined ? {} : msg.metadata,
    msg.content === undefined ? {} : msg.content,
    buffers,
  );
}
