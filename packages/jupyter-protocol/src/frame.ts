import type { JupyterMessage, OutgoingMessage, WireFormat } from './message.js';
import type { DecodeLimits } from './message-shape.js';
import { decodeLegacy, encodeLegacy } from './wire-legacy.js';
import { decodeV1, encodeV1 } from './wire-v1.js';

const encoder = new TextEncoder();

/**
 * Encodes a message in the given wire format: v1 is always binary; legacy is a JSON text frame, or the legacy binary
 * framing when the message carries buffers.
 *
 * Use it where the format is negotiated at run time (a client, a fake server), or to build frames by hand.
 */
export function encodeFrame(msg: OutgoingMessage, format: WireFormat): string | Uint8Array {
  return format === 'v1' ? encodeV1(msg) : encodeLegacy(msg);
}

/**
 * Decodes a frame in the given wire format (a v1 frame that arrived as text is read as its UTF-8 bytes); throws
 * `WireFormatError` when the framing or the JSON is broken, a part has the wrong shape, or the frame carries more
 * buffers than `limits.maxBuffers`.
 *
 * Use it to read what a socket received, in whichever format it negotiated.
 */
export function decodeFrame(data: string | Uint8Array, format: WireFormat, limits?: DecodeLimits): JupyterMessage {
  if (format === 'legacy') return decodeLegacy(data, limits);
  return decodeV1(typeof data === 'string' ? encoder.encode(data) : data, limits);
}
