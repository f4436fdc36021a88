// Test fixture (not exported): a scripted Jupyter kernel that answers channel frames, for fakes and local ws servers.
import { createMessage, decodeFrame, encodeFrame, type JupyterMessage } from '@kernelwarden/jupyter-protocol';

export type Frame = string | Uint8Array;

/** Sends kernel-side messages back to the client. */
export interface KernelReplies {
  /** A message whose parent is `parent`. */
  send(channel: string, msgType: string, content: Record<string, unknown>, parent?: JupyterMessage): void;
  /** A whole message as given (e.g. one the server writes under the client's own session). */
  raw(msg: JupyterMessage): void;
  /** busy, [stdout], execute_reply ok, idle. */
  ok(request: JupyterMessage, opts?: { stdout?: string; replyFirst?: boolean; status?: string }): void;
}

/** What the scripted kernel does with each request. */
export interface KernelScript {
  /** Answer kernel_info_request. @defaultValue true */
  kernelInfo?: boolean;
  /** Publish `status` busy/idle on iopub around each kernel_info_reply, as real kernels do. @defaultValue true */
  kernelInfoStatus?: boolean | ((request: JupyterMessage, index: number) => boolean);
  /**
   * Models ZMQ's slow joiner on a fresh socket: iopub messages are lost until this many kernel_info_requests
   * have arrived on it. @defaultValue 0
   */
  iopubAfterInfos?: number;
  /** Handles execute_request; default: `replies.ok(request)`. */
  execute?(request: JupyterMessage, replies: KernelReplies, index: number): void;
  /** Handles any other request. */
  other?(request: JupyterMessage, replies: KernelReplies): void;
}

export function decodeClientFrame(frame: unknown, format: 'v1' | 'legacy'): JupyterMessage {
  return decodeFrame(typeof frame === 'string' ? frame : toUint8(frame), format);
}

function toUint8(data: unknown): Uint8Array {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  throw new Error(`unexpected frame ${String(data)}`);
}

/** Builds a responder: feed it every client frame; it calls `deliver` with the kernel's frames. */
export function scriptedKernel(
  script: KernelScript,
  deliver: (frame: Frame) => void,
  format: 'v1' | 'legacy' = 'v1',
): { handle(frame: unknown): void; requests: JupyterMessage[]; replies: KernelReplies } {
  const requests: JupyterMessage[] = [];
  let executes = 0;
  let infos = 0;
  const encode = (msg: JupyterMessage) => encodeFrame(msg, format);
  const replies: KernelReplies = {
    send(channel, msgType, content, parent) {
      if (channel === 'iopub' && infos < (script.iopubAfterInfos ?? 0)) return;
      const msg = createMessage(channel as 'iopub', msgType, 'kernel-session', content, {
        parent: parent?.header,
      });
      deliver(encode(msg));
    },
    raw(msg) {
      deliver(encode(msg));
    },
    ok(request, opts = {}) {
      replies.send('iopub', 'status', { execution_state: 'busy' }, request);
      if (opts.stdout !== undefined) replies.send('iopub', 'stream', { name: 'stdout', text: opts.stdout }, request);
      const reply = () =>
        replies.send('shell', 'execute_reply', { status: opts.status ?? 'ok', execution_count: executes }, request);
      const idle = () => replies.send('iopub', 'status', { execution_state: 'idle' }, request);
      if (opts.replyFirst === false) {
        idle();
        reply();
      } else {
        reply();
        idle();
      }
    },
  };
  return {
    requests,
    replies,
    handle(frame) {
      const request = decodeClientFrame(frame, format);
      requests.push(request);
      const type = request.header.msg_type;
      if (type === 'kernel_info_request') {
        if (script.kernelInfo === false) return;
        infos++;
        const status =
          typeof script.kernelInfoStatus === 'function'
            ? script.kernelInfoStatus(request, infos)
            : script.kernelInfoStatus !== false;
        if (status) replies.send('iopub', 'status', { execution_state: 'busy' }, request);
        replies.send(
          'shell',
          'kernel_info_reply',
          { status: 'ok', implementation: 'ipython', language_info: { name: 'python' } },
          request,
        );
        if (status) replies.send('iopub', 'status', { execution_state: 'idle' }, request);
        return;
      }
      if (type === 'execute_request') {
        executes++;
        if (script.execute) script.execute(request, replies, executes);
        else replies.ok(request);
        return;
      }
      script.other?.(request, replies);
    },
  };
}
