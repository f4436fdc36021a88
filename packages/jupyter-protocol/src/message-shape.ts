import { WireFormatError } from './errors.js';
import type { JupyterMessage } from './message.js';

/**
 * How many binary buffers a decoded frame may carry unless the caller says otherwise. Jupyter messages carry a few
 * (widgets, comms); every buffer costs an object, so a frame declaring millions of empty ones would cost gigabytes.
 */
export const DEFAULT_MAX_BUFFERS = 1024;

/** Limits every decoder applies. */
export interface DecodeLimits {
  /** Binary buffers a frame may carry; more is a `WireFormatError`. @defaultValue {@link DEFAULT_MAX_BUFFERS} */
  maxBuffers?: number;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** The parent's `msg_id` when `parent` is an object carrying a string one. */
export function parentIdOf(parent: unknown): string | undefined {
  if (!isRecord(parent)) return undefined;
  const id = parent.msg_id;
  return typeof id === 'string' ? id : undefined;
}

/** What is wrong with the parts of a message, or undefined when each has its shape. Type checks only: no allocation. */
function shapeProblem(
  channel: unknown,
  header: unknown,
  parent: unknown,
  metadata: unknown,
  content: unknown,
): string | undefined {
  if (typeof channel !== 'string') return 'a channel that is not a string';
  if (!isRecord(header)) return 'a header that is not a JSON object';
  if (typeof header.msg_id !== 'string') return 'a header whose msg_id is not a string';
  if (typeof header.msg_type !== 'string') return 'a header whose msg_type is not a string';
  if (header.session !== undefined && typeof header.session !== 'string') {
    return 'a header whose session is not a string';
  }
  if (!isRecord(parent)) return 'a parent_header that is not a JSON object';
  if (parent.msg_id !== undefined && typeof parent.msg_id !== 'string') {
    return 'a parent_header whose msg_id is not a string';
  }
  if (!isRecord(metadata)) return 'metadata that is not a JSON object';
  if (!isRecord(content)) return 'content that is not a JSON object';
  return undefined;
}

/**
 * The message made of these parts, once each has the shape `JupyterMessage` promises (channel a string; header an
 * object with string `msg_id` and `msg_type`; parent_header, metadata and content objects); a `WireFormatError`
 * naming the first bad part otherwise, with the parent's `msg_id` when it can be read.
 */
export function checkedMessage(
  what: string,
  channel: unknown,
  header: unknown,
  parent: unknown,
  metadata: unknown,
  content: unknown,
  buffers: Uint8Array[],
): JupyterMessage {
  const problem = shapeProblem(channel, header, parent, metadata, content);
  if (problem !== undefined) {
    throw new WireFormatError(`${what} has ${problem}`, { parentMsgId: parentIdOf(parent) });
  }
  return {
    channel: channel as string,
    header: header as JupyterMessage['header'],
    parent_header: parent as JupyterMessage['parent_header'],
    metadata: metadata as JupyterMessage['metadata'],
    content: content as JupyterMessage['content'],
    buffers,
  };
}

/** The buffer limit of `limits`, checked. */
export function maxBuffersOf(limits: DecodeLimits | undefined): number {
  const max = limits?.maxBuffers;
  return max === undefined ? DEFAULT_MAX_BUFFERS : max;
}
