import { describe, expect, it } from 'vitest';
import { decodeFrame, encodeFrame, type JupyterMessage, WireFormatError } from './jupyter-wire.js';

const msg: JupyterMessage = {
  channel: 'shell',
  header: { msg_id: 'm1', msg_type: 'execute_request', session: 's', username: 'u', date: 'd', version: '5.3' },
  parent_header: {},
  metadata: { cellId: 'c1' },
  content: { code: 'print("é")' },
};

describe('jupyter wire formats', () => {
  it('v1: little-endian uint64 offset table, channel then the four JSON parts, the last offset is the length', () => {
    const bytes = encodeFrame(msg, 'v1') as Uint8Array;
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const count = Number(view.getBigUint64(0, true));
    expect(count).toBe(6);
    expect(Number(view.getBigUint64(8, true))).toBe(8 * (count + 1));
    expect(Number(view.getBigUint64(8 * count, true))).toBe(bytes.byteLength);
    const channelEnd = Number(view.getBigUint64(16, true));
    expect(new TextDecoder().decode(bytes.subarray(8 * (count + 1), channelEnd))).toBe('shell');
    expect(decodeFrame(bytes, 'v1')).toEqual(msg);
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
    expect(decodeFrame(text, 'legacy')).toEqual(msg);
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
