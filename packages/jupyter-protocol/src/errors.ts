import { KernelwardenError } from '@kernelwarden/core';

/**
 * A frame could not be decoded: wrong framing, offsets out of order or past the end, a part that is not UTF-8, or
 * JSON that is not a Jupyter message (code `WIRE_FORMAT`).
 *
 * Thrown by every decoder of this package; catch it to skip a malformed frame and keep the connection.
 */
export class WireFormatError extends KernelwardenError {
  static override readonly brand: string = 'WireFormatError';

  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, { code: 'WIRE_FORMAT', cause: options.cause });
  }
}
