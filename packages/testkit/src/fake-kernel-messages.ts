// The messages a FakeKernel sends: their envelope, its `kernel_info_reply`, and the fixed replies it gives to the
// shell requests it does not simulate.
import { randomUUID } from 'node:crypto';
import type { JupyterMessage, MessageHeader } from '@kernelwarden/jupyter-protocol';

/** A message of the kernel's `session`, with `parent`'s header as its parent header. */
export function kernelMessage(
  session: string,
  channel: string,
  msgType: string,
  content: Record<string, unknown>,
  parent?: JupyterMessage,
): JupyterMessage {
  const header: MessageHeader = {
    msg_id: randomUUID(),
    msg_type: msgType,
    session,
    username: 'kernel',
    date: new Date().toISOString(),
    version: '5.3',
  };
  return { channel, header, parent_header: parent?.header ?? {}, metadata: {}, content, buffers: [] };
}

/** The `kernel_info_reply` content of a kernel of `language`. */
export function kernelInfo(language: string): Record<string, unknown> {
  return {
    status: 'ok',
    protocol_version: '5.3',
    implementation: 'kernelwarden-fake',
    implementation_version: '0.1.0',
    language_info: {
      name: language,
      version: '3.11.0',
      mimetype: language === 'python' ? 'text/x-python' : 'text/plain',
      file_extension: language === 'python' ? '.py' : '.txt',
    },
    banner: 'kernelwarden FakeGateway kernel',
    help_links: [],
  };
}

/**
 * The reply to a shell request other than `execute_request` and `kernel_info_request`: an empty but valid answer
 * (no comms, no completions, nothing found, no history), or undefined for a type ipykernel does not know (it logs
 * "Unknown message type" and answers nothing).
 */
export function fixedShellReply(
  type: string | undefined,
): { type: string; content: Record<string, unknown> } | undefined {
  switch (type) {
    case 'comm_info_request':
      return { type: 'comm_info_reply', content: { status: 'ok', comms: {} } };
    case 'is_complete_request':
      return { type: 'is_complete_reply', content: { status: 'complete' } };
    case 'complete_request':
      return {
        type: 'complete_reply',
        content: { status: 'ok', matches: [], cursor_start: 0, cursor_end: 0, metadata: {} },
      };
    case 'inspect_request':
      return { type: 'inspect_reply', content: { status: 'ok', found: false, data: {}, metadata: {} } };
    case 'history_request':
      return { type: 'history_reply', content: { status: 'ok', history: [] } };
    default:
      return undefined;
  }
}
