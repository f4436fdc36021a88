import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { WireFormatError } from './errors.js';
import type { JupyterMessage } from './message.js';
import { DEFAULT_MAX_BUFFERS } from './message-shape.js';
import { decodeLegacy, encodeLegacy } from './wire-legacy.js';
import { decodeV1, encodeV1 } from './wire-v1.js';

const good: JupyterMessage = {
  channel: 'iopub',
  header: { msg_id: 'm1', msg_type: 'stream', session: 's', username: 'u', date: 'd', version: '5.3' },
  parent_header: { msg_id: 'cell-1' },
  metadata: {},
  content: { name: 'stdout', text: 'hi' },
  buffers: [],
};

/** A message with one field replaced by any value, as a hostile kernel could send it. */
function withField(
  field: keyof JupyterMessage | 'header.msg_id' | 'header.msg_type' | 'parent.msg_id',
  value: unknown,
) {
  const msg = structuredClone(good) as unknown as Record<string, Record<string, unknown>>;
  if (field === 'header.msg_id') msg.header!.msg_id = value as never;
  else if (field === 'header.msg_type') msg.header!.msg_type = value as never;
  else if (field === 'parent.msg_id') msg.parent_header!.msg_id = value as never;
  else msg[field] = value as never;
  return msg as unknown as JupyterMessage;
}

/** What a sender's channel bytes say, for a channel value of any type. */
function asChannelBytes(channel: unknown): string {
  return typeof channel === 'string' ? channel : (JSON.stringify(channel) ?? 'undefined');
}

const decoders = [
  // A v1 frame's channel is bytes: whatever a sender puts there decodes as text (our encoder takes strings only).
  ['v1', (m: JupyterMessage) => decodeV1(encodeV1({ ...m, channel: asChannelBytes(m.channel) }))],
  // By hand: the legacy encoder reads header.msg_id, and a hostile sender uses no encoder of ours.
  ['legacy', (m: JupyterMessage) => decodeLegacy(JSON.stringify({ ...m, buffers: [] }))],
] as const;

const wrong = [null, 7, 'text', [], true];

/** What `fn` throws (undefined when it returns). */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('decoders check every part of a message', () => {
  for (const [format, roundTrip] of decoders) {
    for (const field of ['header', 'parent_header', 'metadata', 'content'] as const) {
      it(`${format}: a ${field} that is null, a number, a string, an array or a boolean is a WireFormatError`, () => {
        for (const value of wrong) {
          expect(() => roundTrip(withField(field, value)), JSON.stringify(value)).toThrow(WireFormatError);
        }
      });
    }

    it(`${format}: a header without a string msg_id or msg_type, or a parent msg_id that is not a string, is a WireFormatError`, () => {
      for (const value of [null, 1, {}, ['x']]) {
        expect(() => roundTrip(withField('header.msg_id', value))).toThrow(WireFormatError);
        expect(() => roundTrip(withField('header.msg_type', value))).toThrow(WireFormatError);
        expect(() => roundTrip(withField('parent.msg_id', value))).toThrow(WireFormatError);
      }
    });

    it(`${format}: names the parent's msg_id when the parent_header can be read, and none when it cannot`, () => {
      const named = thrown(() => roundTrip(withField('content', null))) as WireFormatError;
      expect(WireFormatError.isInstance(named)).toBe(true);
      expect(named.parentMsgId).toBe('cell-1');
      expect(named.message).toMatch(/content that is not a JSON object/);
      const unnamed = thrown(() => roundTrip(withField('parent_header', null))) as WireFormatError;
      expect(unnamed.parentMsgId).toBeUndefined();
    });

    it(`${format}: any JSON value in any part either decodes to the promised shape or throws WireFormatError`, () => {
      const field = fc.constantFrom('header', 'parent_header', 'metadata', 'content', 'channel') as fc.Arbitrary<
        keyof JupyterMessage
      >;
      fc.assert(
        fc.property(field, fc.jsonValue({ maxDepth: 2 }), (name, value) => {
          let msg: JupyterMessage;
          try {
            msg = roundTrip(withField(name, value));
          } catch (error) {
            expect(WireFormatError.isInstance(error)).toBe(true);
            return;
          }
          expect(typeof msg.channel).toBe('string');
          for (const part of [msg.header, msg.parent_header, msg.metadata, msg.content]) {
            expect(part !== null && typeof part === 'object' && !Array.isArray(part)).toBe(true);
          }
          expect(typeof msg.header.msg_id).toBe('string');
          expect(typeof msg.header.msg_type).toBe('string');
        }),
        { numRuns: 300 },
      );
    });
  }

  it('legacy: a part left out reads as {}, as jupyter_server writes none without them', () => {
    const text = JSON.stringify({ channel: 'iopub', header: good.header });
    expect(decodeLegacy(text)).toMatchObject({ parent_header: {}, metadata: {}, content: {} });
  });
});

describe('buffer limits', () => {
  /** A v1 frame declaring `buffers` empty buffers: only its offset table grows. */
  function v1WithEmptyBuffers(buffers: number): Uint8Array {
    return encodeV1({ ...good, buffers: Array.from({ length: buffers }, () => new Uint8Array(0)) });
  }

  it(`v1: refuses a frame declaring more than ${DEFAULT_MAX_BUFFERS} buffers before allocating them, and takes up to that`, () => {
    expect(decodeV1(v1WithEmptyBuffers(DEFAULT_MAX_BUFFERS)).buffers).toHaveLength(DEFAULT_MAX_BUFFERS);
    expect(() => decodeV1(v1WithEmptyBuffers(DEFAULT_MAX_BUFFERS + 1))).toThrow(/more than the 1024 allowed/);
    expect(() => decodeV1(v1WithEmptyBuffers(3), { maxBuffers: 2 })).toThrow(WireFormatError);
  });

  it('v1: a frame whose count declares millions of offsets is refused without reading them', () => {
    // 8 MiB of offset table, all equal (zero-length buffers): the decoder must not build millions of arrays.
    const count = 1_000_000;
    const frame = new Uint8Array(8 * (count + 1));
    const view = new DataView(frame.buffer);
    view.setUint32(0, count, true);
    const end = frame.byteLength;
    for (let i = 1; i <= count; i++) view.setUint32(8 * i, end, true);
    expect(() => decodeV1(frame)).toThrow(/declares 999994 buffers/);
  });

  it('legacy: refuses a binary frame declaring more buffers than allowed', () => {
    const withBuffers = (n: number) =>
      encodeLegacy({ ...good, buffers: Array.from({ length: n }, () => new Uint8Array(0)) }) as Uint8Array;
    expect(decodeLegacy(withBuffers(DEFAULT_MAX_BUFFERS)).buffers).toHaveLength(DEFAULT_MAX_BUFFERS);
    expect(() => decodeLegacy(withBuffers(DEFAULT_MAX_BUFFERS + 1))).toThrow(WireFormatError);
    expect(() => decodeLegacy(withBuffers(5), { maxBuffers: 4 })).toThrow(WireFormatError);
  });
});
