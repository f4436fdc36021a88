/**
 * The largest `code` one tool call sends to a kernel: 4 MiB in UTF-8, as `kernelwarden run`'s default source limit
 * (a cell is one message to the gateway, whose WebSocket takes at most 10 MiB per message).
 */
export const DEFAULT_MAX_SOURCE_BYTES = 4 * 1024 * 1024;

/**
 * Why `code` cannot be sent to a kernel, as a sentence for the model, or `undefined` when it can: more than
 * `maxBytes` in UTF-8, a NUL character (ipykernel does not answer such a cell at all), or a lone UTF-16 surrogate
 * (it would reach the kernel silently changed to U+FFFD).
 */
export function sourceProblem(code: string, maxBytes: number): string | undefined {
  const bytes = Buffer.byteLength(code, 'utf8');
  if (bytes > maxBytes) {
    return (
      `The code is ${formatBytes(bytes)}, larger than this server's source limit of ${formatBytes(maxBytes)} ` +
      '(maxSourceBytes, `kernelwarden mcp --max-source-size`); nothing was run. Send less code at a time, or ' +
      'write the data to a file and read it in the cell.'
    );
  }
  const nul = code.indexOf('\0');
  if (nul >= 0) {
    return `The code contains a NUL character (line ${lineOf(code, nul)}): kernels cannot run it; nothing was run.`;
  }
  const at = firstLoneSurrogate(code);
  if (at >= 0) {
    return (
      `The code contains a lone UTF-16 surrogate (line ${lineOf(code, at)}): it is not text a kernel can read; ` +
      'nothing was run.'
    );
  }
  return undefined;
}

/** `3.0 MiB (3,145,728 bytes)`, `512 KiB (524,288 bytes)`, `900 bytes`. */
export function formatBytes(bytes: number): string {
  const exact = `${bytes.toLocaleString('en-US')} bytes`;
  if (bytes >= 1024 * 1024) return `${trim(bytes / (1024 * 1024))} MiB (${exact})`;
  if (bytes >= 1024) return `${trim(bytes / 1024)} KiB (${exact})`;
  return exact;
}

function trim(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}

function lineOf(text: string, index: number): number {
  let line = 1;
  for (let i = text.indexOf('\n'); i !== -1 && i < index; i = text.indexOf('\n', i + 1)) line++;
  return line;
}

function firstLoneSurrogate(text: string): number {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
      else return i;
    } else if (c >= 0xdc00 && c <= 0xdfff) return i;
  }
  return -1;
}
