import {
  decodeFrame as decodeAnyFrame,
  decodeLegacy as decodeLegacyFrame,
  decodeV1 as decodeV1Frame,
  type JupyterMessage,
  type WireFormat,
  WireFormatError,
} from '@kernelwarden/jupyter-protocol';
import { ProtocolError } from './errors.js';

/**
 * Decodes one v1 binary frame (the codec of `@kernelwarden/jupyter-protocol`); throws `ProtocolError`, with the
 * codec's `WireFormatError` as `cause`, when it is malformed.
 */
export function decodeV1(frame: Uint8Array): JupyterMessage {
  return asProtocol(() => decodeV1Frame(frame));
}

/**
 * Decodes one legacy frame, text or binary (the codec of `@kernelwarden/jupyter-protocol`); throws `ProtocolError`,
 * with the codec's `WireFormatError` as `cause`, when it is malformed.
 */
export function decodeLegacy(frame: string | Uint8Array): JupyterMessage {
  return asProtocol(() => decodeLegacyFrame(frame));
}

/** Decodes a frame in the negotiated format; throws `ProtocolError` as `decodeV1` and `decodeLegacy` do. */
export function decodeFrame(data: string | Uint8Array, format: WireFormat): JupyterMessage {
  return asProtocol(() => decodeAnyFrame(data, format));
}

/** This package reports every break of the Jupyter protocol as its own `ProtocolError`. */
function asProtocol(decode: () => JupyterMessage): JupyterMessage {
  try {
    return decode();
  } catch (error) {
    if (WireFormatError.isInstance(error)) {
      const { parentMsgId } = error;
      throw new ProtocolError(error.message, { cause: error, ...(parentMsgId === undefined ? {} : { parentMsgId }) });
    }
    throw error;
  }
}
