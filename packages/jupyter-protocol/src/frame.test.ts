import { describe, expect, it } from 'vitest';
import { WireFormatError } from './errors.js';
import { decodeFrame, encodeFrame } from './frame.js';
import { createMessage, type OutgoingMessage, PROTOCOL_VERSION } from './message.js';

const msg: OutgoingMessage = {
  channel: 'shell',
  header: { msg_id: 'm1', msg_type: 'execute_request', session: 's', username: 'u', date: 'd', version: '5.3' },
  parent_header: {},
  metadata: { cellId: 'c1' },
  content: { code: 'print("é")' },
};

describe('encodeFrame / decodeFrame', () => {
  it('reads a v1 frame that arrived as a text frame as its UTF-8 bytes', () => {
    // Small enough that every byte of the offset table is ASCII, so the text round trip keeps it.
    const tiny = {
      ...msg,
      header: { msg_id: 'm', msg_type: 't' } as OutgoingMessage['header'],
      metadata: {},
      content: {},
    };
    const asText = new TextDecoder().decode(encodeFrame(tiny, 'v1') as Uint8Array);
    expect(decodeFrame(asText, 'v1')).toEqual({ ...tiny, buffers: [] });
  });

  it('v1: little-endian uint64 offset table, channel then the four JSON parts, the last offset is the length', () => {
    const bytes = encodeFrame(msg, 'v1') as Uint8Array;
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const count = Number(view.getBigUint64(0, true));
    expect(count).toBe(6);
    expect(Number(view.getBigUint64(8, true))).toBe(8 * (count + 1));
    expect(Number(view.getBigUint64(8 * count, true))).toBe(bytes.byteLength);
    const channelEnd = Number(view.getBigUint64(16, true));
    expect(new TextDecoder().decode(bytes.subarray(8 * (count + 1), channelEnd))).toBe('shell');
    expect(decodeFrame(bytes, 'v1')).toEqual({ ...msg, buffers: [] });
  });

  it('v1 carries binary buffers after the content', () => {
    const withBuffers = { ...msg, buffers: [new Uint8Array([1, 2, 3]), new Uint8Array([])] };
    expect(decodeFrame(encodeFrame(withBuffers, 'v1'), 'v1').buffers).toEqual(withBuffers.buffers);
  });

  it('legacy: a JSON text frame with channel, msg_id and msg_type at the top, as jupyter_server sends', () => {
    const text = encodeFrame(msg, 'legacy');
    expect(typeof text).toBe('string');
    const parsed = JSON.parse(text as string);
    expect(parsed).toMatchObject({ channel: 'shell', msg_id: 'm1', msg_type: 'execute_request', buffers: [] });
    expect(decodeFrame(text, 'legacy')).toEqual({ ...msg, buffers: [] });
  });

  it('legacy with buffers: big-endian uint32 count and start offsets, then the JSON, then the buffers', () => {
    const withBuffers = { ...msg, buffers: [new Uint8Array([9, 8])] };
    const bytes = encodeFrame(withBuffers, 'legacy') as Uint8Array;
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    expect(view.getUint32(0, false)).toBe(2);
    expect(view.getUint32(4, false)).toBe(12);
    expect(Array.from(bytes.subarray(view.getUint32(8, false)))).toEqual([9, 8]);
    expect(decodeFrame(bytes, 'legacy')).toEqual(withBuffers);
  });

  it('rejects malformed frames with WireFormatError', () => {
    expect(() => decodeFrame(new Uint8Array([1, 2, 3]), 'v1')).toThrow(WireFormatError);
    expect(() => decodeFrame('{not json', 'legacy')).toThrow(WireFormatError);
    expect(() => decodeFrame('{"no":"header"}', 'legacy')).toThrow(WireFormatError);
    const bad = encodeFrame(msg, 'v1') as Uint8Array;
    new DataView(bad.buffer).setBigUint64(16, 10_000n, true);
    expect(() => decodeFrame(bad, 'v1')).toThrow(WireFormatError);
  });
});

describe('createMessage', () => {
  it('writes a fresh msg_id, the protocol version and the session into the header, and no buffers', () => {
    const a = createMessage('shell', 'kernel_info_request', 'sess', {});
    const b = createMessage('shell', 'kernel_info_request', 'sess', {});
    expect(a.header).toMatchObject({ msg_type: 'kernel_info_request', session: 'sess', version: PROTOCOL_VERSION });
    expect(a.header.msg_id).not.toBe(b.header.msg_id);
    expect(a).toMatchObject({ channel: 'shell', parent_header: {}, metadata: {}, content: {}, buffers: [] });
  });

  it('answers a request when given its header as parent', () => {
    const request = createMessage('stdin', 'input_request', 'sess', { prompt: '?' });
    const reply = createMessage('stdin', 'input_reply', 'sess', { value: 'x' }, { parent: request.header });
    expect(reply.parent_header.msg_id).toBe(request.header.msg_id);
  });
});
