/**
 * The bytes (or, for a legacy text frame, the string) of what a socket delivered: `ws` gives Buffers, arrays of
 * them, or strings; WHATWG sockets give ArrayBuffers. A v1 frame that arrived as text is encoded as UTF-8.
 */
export function toBytes(data: unknown, binaryOnly: boolean): string | Uint8Array {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (typeof data === 'string') {
    if (binaryOnly) return new TextEncoder().encode(data);
    return data;
  }
  if (Array.isArray(data)) {
    const chunks = data as Uint8Array[];
    let total = 0;
    for (const c of chunks) total += c.byteLength;
    const out = new Uint8Array(total);
    let at = 0;
    for (const c of chunks) {
      out.set(c, at);
      at += c.byteLength;
    }
    return out;
  }
  return new Uint8Array(0);
}
