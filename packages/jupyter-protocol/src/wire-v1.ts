import { WireFormatError } from './errors.js';
import type { JupyterMessage, OutgoingMessage } from './message.js';
import { checkedMessage, type DecodeLimits, maxBuffersOf, parentIdOf } from './message-shape.js';

/**
 * The WebSocket subprotocol of the v1 wire format, `v1.kernel.websocket.jupyter.org`, as jupyter_server's
 * `serialize_msg_to_ws_v1` / `deserialize_msg_from_ws_v1` define it: a little-endian uint64 count of offsets, the
 * offsets (uint64 LE, from the frame's start), then the channel name and the parts header, parent_header, metadata,
 * content and buffers. The last offset is the end of the last part.
 */
export const V1_SUBPROTOCOL = 'v1.kernel.websocket.jupyter.org';

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });
const TWO_32 = 2 ** 32;

// uint64 little-endian without BigInt (offsets stay below 2^53): this runs for every frame.
function setUint64(view: DataView, at: number, value: number): void {
  view.setUint32(at, value % TWO_32, true);
  view.setUint32(at + 4, Math.floor(value / TWO_32), true);
}
function getUint64(view: DataView, at: number): number {
  return view.getUint32(at, true) + view.getUint32(at + 4, true) * TWO_32;
}

/** Encodes a message as one v1 binary frame. */
export function encodeV1(msg: OutgoingMessage): Uint8Array {
  const parts: Uint8Array[] = [
    encoder.encode(msg.channel),
    encoder.encode(JSON.stringify(msg.header)),
    encoder.encode(JSON.stringify(msg.parent_header)),
    encoder.encode(JSON.stringify(msg.metadata)),
    encoder.encode(JSON.stringify(msg.content)),
    ...(msg.buffers ?? []),
  ];
  // One offset per part plus the end offset.
  const offsetCount = parts.length + 1;
  const headerSize = 8 * (offsetCount + 1);
  let total = headerSize;
  for (const part of parts) total += part.byteLength;
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  setUint64(view, 0, offsetCount);
  let offset = headerSize;
  let i = 0;
  for (const part of parts) {
    setUint64(view, 8 * (i + 1), offset);
    out.set(part, offset);
    offset += part.byteLength;
    i++;
  }
  setUint64(view, 8 * (i + 1), offset);
  return out;
}

/**
 * Decodes one v1 binary frame; throws `WireFormatError` when it is malformed: framing, a part that is not UTF-8 JSON,
 * a part of the wrong shape (see `JupyterMessage`), or more than `limits.maxBuffers` buffers (checked before anything
 * is allocated for them).
 */
export function decodeV1(frame: Uint8Array, limits?: DecodeLimits): JupyterMessage {
  if (frame.byteLength < 8) throw new WireFormatError(`v1 frame too short (${frame.byteLength} bytes)`);
  const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  const count = getUint64(view, 0);
  // channel, header, parent_header, metadata, content (+ buffers) and the end offset.
  if (count < 6 || 8 * (count + 1) > frame.byteLength) {
    throw new WireFormatError(`v1 frame declares ${count} offsets in ${frame.byteLength} bytes`);
  }
  const maxBuffers = maxBuffersOf(limits);
  if (count - 6 > maxBuffers) {
    throw new WireFormatError(`v1 frame declares ${count - 6} buffers, more than the ${maxBuffers} allowed`, {
      parentMsgId: parentIdOf(parentPart(frame, view, count)),
    });
  }
  const offsets = new Array<number>(count);
  let previous = 8 * (count + 1);
  for (let i = 0; i < count; i++) {
    const value = getUint64(view, 8 * (i + 1));
    if (value < previous || value > frame.byteLength) {
      throw new WireFormatError(`v1 frame offset ${i} (${value}) is out of order or past the frame's end`);
    }
    offsets[i] = value;
    previous = value;
  }
  const part = (i: number) => frame.subarray(offsets[i]!, offsets[i + 1]!);
  let channel: string;
  let header: unknown;
  let parent: unknown;
  let metadata: unknown;
  let content: unknown;
  try {
    channel = decoder.decode(part(0));
    header = JSON.parse(decoder.decode(part(1)));
    parent = JSON.parse(decoder.decode(part(2)));
    metadata = JSON.parse(decoder.decode(part(3)));
    content = JSON.parse(decoder.decode(part(4)));
  } catch (cause) {
    throw new WireFormatError('v1 frame has a part that is not valid UTF-8 JSON', {
      cause,
      parentMsgId: parentIdOf(parent ?? readParent(part(2))),
    });
  }
  const buffers: Uint8Array[] = [];
  for (let i = 5; i < count - 1; i++) buffers.push(part(i).slice());
  return checkedMessage('v1 frame', channel, header, parent, metadata, content, buffers);
}

/** The parent_header of a frame refused before its offsets were read, when its own two offsets are sound. */
function parentPart(frame: Uint8Array, view: DataView, count: number): unknown {
  const start = getUint64(view, 8 * 3);
  const end = getUint64(view, 8 * 4);
  if (start < 8 * (count + 1) || end < start || end > frame.byteLength) return undefined;
  return readParent(frame.subarray(start, end));
}

/** The parent_header part on its own, for naming the request of a frame whose other parts are broken. */
function readParent(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(decoder.decode(bytes));
  } catch {
    return undefined;
  }
}
