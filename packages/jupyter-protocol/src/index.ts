export { WireFormatError } from './errors.js';
export { decodeFrame, encodeFrame } from './frame.js';
export type { ChannelName, JupyterMessage, MessageHeader, OutgoingMessage, WireFormat } from './message.js';
export { createMessage, PROTOCOL_VERSION } from './message.js';
export { DEFAULT_MAX_BUFFERS, type DecodeLimits } from './message-shape.js';
export { decodeLegacy, encodeLegacy } from './wire-legacy.js';
export { decodeV1, encodeV1, V1_SUBPROTOCOL } from './wire-v1.js';
