import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { WireFormatError } from './errors.js';
import type { JupyterMessage } from './message.js';
import { decodeLegacy, encodeLegacy } from './wire-legacy.js';
import { decodeV1, encodeV1 } from './wire-v1.js';

// Frames produced by jupyter_server 1.23's own serialize_binary_message / serialize_msg_to_ws_v1 for one message
// with two buffers (hex), so decoding is checked against the server's real output, not only against our encoder.
const SERVER_LEGACY =
  '0000000300000010000001190000011c7b226368616e6e656c223a2022696f707562222c2022686561646572223a207b226d73675f6964223a20226d31222c20226d73675f74797065223a2022636f6d6d5f6d7367222c202273657373696f6e223a202273222c2022757365726e616d65223a202275222c202264617465223a2022323032362d30312d30315430303a30303a30305a222c202276657273696f6e223a2022352e33227d2c2022706172656e745f686561646572223a207b226d73675f6964223a20227030227d2c20226d65746164617461223a207b2263656c6c4964223a202263227d2c2022636f6e74656e74223a207b2264617461223a207b2278223a205b312c20322c20225c7530306539225d7d7d7d00010268656c6c6f';
const SERVER_V1 =
  '080000000000000048000000000000004d00000000000000c800000000000000d800000000000000e70000000000000008010000000000000b010000000000001001000000000000696f7075627b226d73675f6964223a20226d31222c20226d73675f74797065223a2022636f6d6d5f6d7367222c202273657373696f6e223a202273222c2022757365726e616d65223a202275222c202264617465223a2022323032362d30312d30315430303a30303a30305a222c202276657273696f6e223a2022352e33227d7b226d73675f6964223a20227030227d7b2263656c6c4964223a202263227d7b2264617461223a207b2278223a205b312c20322c20225c7530306539225d7d7d00010268656c6c6f';

const SERVER_MESSAGE: JupyterMessage = {
  channel: 'iopub',
  header: {
    msg_id: 'm1',
    msg_type: 'comm_msg',
    session: 's',
    username: 'u',
    date: '2026-01-01T00:00:00Z',
    version: '5.3',
  },
  parent_header: { msg_id: 'p0' },
  metadata: { cellId: 'c' },
  content: { data: { x: [1, 2, 'é'] } },
  buffers: [new Uint8Array([0, 1, 2]), new TextEncoder().encode('hello')],
};

const hex = (s: string) => Uint8Array.from(Buffer.from(s, 'hex'));

const jsonObject = fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 5 });
const message: fc.Arbitrary<JupyterMessage> = fc.record({
  channel: fc.constantFrom('shell', 'iopub', 'stdin', 'control'),
  header: fc.record({
    msg_id: fc.uuid(),
    msg_type: fc.string({ minLength: 1 }),
    session: fc.string(),
    username: fc.string(),
    date: fc.constant('2026-01-01T00:00:00.000Z'),
    version: fc.constant('5.3'),
  }),
  parent_header: fc.oneof(fc.constant({}), fc.record({ msg_id: fc.uuid() })),
  metadata: jsonObject,
  content: jsonObject,
  buffers: fc.array(fc.uint8Array({ maxLength: 64 }), { maxLength: 4 }),
});

/** What a JSON round trip makes of a message (e.g. -0 becomes 0); buffers are kept as bytes. */
const normalised = (m: JupyterMessage) => ({
  ...(JSON.parse(JSON.stringify({ ...m, buffers: undefined })) as object),
  buffers: m.buffers.map((b) => [...b]),
});
const comparable = (m: JupyterMessage) => ({ ...m, buffers: m.buffers.map((b) => [...b]) });

describe('wire formats', () => {
  it('round-trips random messages with buffers through both encoders', () => {
    fc.assert(
      fc.property(message, (m) => {
        expect(comparable(decodeV1(encodeV1(m)))).toEqual(normalised(m));
        expect(comparable(decodeLegacy(encodeLegacy(m)))).toEqual(normalised(m));
      }),
      { numRuns: 300 },
    );
  });

  it("decodes jupyter_server's own v1 and legacy binary frames", () => {
    expect(comparable(decodeV1(hex(SERVER_V1)))).toEqual(comparable(SERVER_MESSAGE));
    expect(comparable(decodeLegacy(hex(SERVER_LEGACY)))).toEqual(comparable(SERVER_MESSAGE));
  });

  it('lays v1 out with little-endian uint64 offsets and legacy with big-endian uint32 offsets', () => {
    const v1 = encodeV1(SERVER_MESSAGE);
    const v1View = new DataView(v1.buffer);
    // channel + 4 JSON parts + 2 buffers + the end offset.
    expect(v1View.getBigUint64(0, true)).toBe(8n);
    expect(v1View.getBigUint64(8, true)).toBe(BigInt(8 * 9));
    expect(v1View.getBigUint64(8 * 8, true)).toBe(BigInt(v1.byteLength));
    expect(new TextDecoder().decode(v1.subarray(72, 77))).toBe('iopub');

    const legacy = encodeLegacy(SERVER_MESSAGE) as Uint8Array;
    const legacyView = new DataView(legacy.buffer);
    expect(legacyView.getUint32(0, false)).toBe(3);
    expect(legacyView.getUint32(4, false)).toBe(16);
    expect([...legacy.subarray(legacy.byteLength - 8)]).toEqual([0, 1, 2, ...new TextEncoder().encode('hello')]);
  });

  it('encodes a legacy message without buffers as one JSON text frame', () => {
    const text = encodeLegacy({ ...SERVER_MESSAGE, buffers: [] });
    expect(typeof text).toBe('string');
    expect(JSON.parse(text as string)).toMatchObject({ channel: 'iopub', header: { msg_id: 'm1' } });
  });

  it('rejects a v1 frame whose header is not a JSON object, so no reader meets a null header', () => {
    const bad = encodeV1({ ...SERVER_MESSAGE, header: null as unknown as JupyterMessage['header'] });
    expect(() => decodeV1(bad)).toThrow(WireFormatError);
  });

  it('throws WireFormatError on truncated or inconsistent frames', () => {
    const v1 = encodeV1(SERVER_MESSAGE);
    for (const bad of [v1.subarray(0, 4), v1.subarray(0, 40), v1.subarray(0, v1.byteLength - 3)]) {
      expect(() => decodeV1(bad)).toThrow(WireFormatError);
    }
    expect(() => decodeLegacy('{"no": "channel"}')).toThrow(WireFormatError);
    expect(() => decodeLegacy(new Uint8Array([0, 0, 0, 9, 0]))).toThrow(WireFormatError);
  });
});
