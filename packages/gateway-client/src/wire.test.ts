import { encodeFrame, WireFormatError } from '@kernelwarden/jupyter-protocol';
import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.js';
import { decodeFrame, decodeLegacy, decodeV1 } from './wire.js';

const message = {
  channel: 'iopub',
  header: { msg_id: 'm', msg_type: 'status', session: 's', username: 'u', date: 'd', version: '5.3' },
  parent_header: {},
  metadata: {},
  content: { execution_state: 'idle' },
};

describe('wire (the shared codec, reported as ProtocolError)', () => {
  it('decodes what the shared codec encodes, in both formats', () => {
    expect(decodeV1(encodeFrame(message, 'v1') as Uint8Array)).toEqual({ ...message, buffers: [] });
    expect(decodeLegacy(encodeFrame(message, 'legacy'))).toEqual({ ...message, buffers: [] });
    expect(decodeFrame(encodeFrame(message, 'legacy'), 'legacy').content).toEqual(message.content);
  });

  it("throws ProtocolError with the codec's WireFormatError as cause on a malformed frame", () => {
    for (const decode of [() => decodeV1(new Uint8Array([1, 2])), () => decodeLegacy('{"no": "channel"}')]) {
      let error: unknown;
      try {
        decode();
      } catch (e) {
        error = e;
      }
      expect(ProtocolError.isInstance(error)).toBe(true);
      expect((error as ProtocolError).code).toBe('PROTOCOL');
      expect(WireFormatError.isInstance((error as ProtocolError).cause)).toBe(true);
    }
  });
});
