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
 * One Jupyter message as it travels over the channels WebSocket, in either wire format.
 *
 * `parent_header` is `{}` for messages without a parent; `buffers` holds the binary parts (often none).
 */
export interface JupyterMessage {
  channel: string;
  header: MessageHeader;
  parent_header: Partial<MessageHeader>;
  metadata: Record<string, unknown>;
  content: Record<string, unknown>;
  buffers: Uint8Array[];
}

/** Protocol version we speak. */
export const PROTOCOL_VERSION = '5.3';

/** Builds a request message with a fresh `msg_id`. */
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
