import { randomUUID } from 'node:crypto';

/** The Jupyter channels a client talks on. */
export type ChannelName = 'shell' | 'iopub' | 'stdin' | 'control' | 'hb';

/** A Jupyter message header (messaging protocol 5.3). */
export interface MessageHeader {
  msg_id: string;
  msg_type: string;
  session: string;
  username: string;
  date: string;
  version: string;
  [key: string]: unknown;
}

/**
 * One Jupyter message as it travels over the kernel channels WebSocket, in either wire format.
 *
 * `channel` is `shell`, `iopub`, `stdin` or `control`; `parent_header` is `{}` for a message without a parent;
 * `buffers` holds the binary parts (usually none). Every decoder returns this shape.
 */
export interface JupyterMessage {
  channel: string;
  header: MessageHeader;
  parent_header: Partial<MessageHeader>;
  metadata: Record<string, unknown>;
  content: Record<string, unknown>;
  buffers: Uint8Array[];
}

/**
 * A message to encode: a `JupyterMessage` whose `buffers` may be left out (it has none).
 *
 * Every encoder takes it, so a message written by hand needs no `buffers: []`.
 */
export type OutgoingMessage = Omit<JupyterMessage, 'buffers'> & { buffers?: Uint8Array[] };

/** The two channel wire formats: the `v1.kernel.websocket.jupyter.org` subprotocol, or the legacy JSON format. */
export type WireFormat = 'v1' | 'legacy';

/** The messaging protocol version `createMessage` writes into headers. */
export const PROTOCOL_VERSION = '5.3';

/**
 * Builds a message with a fresh `msg_id`, the current date and `username: 'kernelwarden'`.
 *
 * Use it for every request a client sends; pass `parent` to answer a request (an `input_reply`).
 */
export function createMessage(
  channel: ChannelName,
  msgType: string,
  session: string,
  content: Record<string, unknown>,
  opts: { metadata?: Record<string, unknown>; parent?: Partial<MessageHeader>; buffers?: Uint8Array[] } = {},
): JupyterMessage {
  return {
    channel,
    header: {
      msg_id: randomUUID(),
      msg_type: msgType,
      session,
      username: 'kernelwarden',
      date: new Date().toISOString(),
      version: PROTOCOL_VERSION,
    },
    parent_header: opts.parent ?? {},
    metadata: opts.metadata ?? {},
    content,
    buffers: opts.buffers ?? [],
  };
}
