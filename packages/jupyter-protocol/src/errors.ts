import { KernelwardenError } from '@kernelwarden/core';

/**
 * A frame could not be decoded: wrong framing, offsets out of order or past the end, more buffers than allowed, a part
 * that is not UTF-8, JSON that is not a Jupyter message, or a field of the wrong shape (code `WIRE_FORMAT`).
 *
 * Thrown by every decoder of this package; catch it to skip a malformed frame and keep the connection.
 * `parentMsgId` names the request the frame answered when its `parent_header` could still be read, so a client can
 * tell which of its requests the broken message belonged to.
 */
export class WireFormatError extends KernelwardenError {
  static override readonly brand: string = 'WireFormatError';
  /** The `msg_id` of the frame's `parent_header`, when that part was a JSON object with a string `msg_id`. */
  readonly parentMsgId: string | undefined;

  constructor(message: string, options: { cause?: unknown; parentMsgId?: string } = {}) {
    super(message, { code: 'WIRE_FORMAT', cause: options.cause });
    this.parentMsgId = options.parentMsgId;
  }
}
