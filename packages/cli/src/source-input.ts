import { open } from 'node:fs/promises';
import { Transform } from 'node:stream';
import { KernelwardenError } from '@kernelwarden/core';
import { formatSize } from './size.js';

/**
 * The largest source the CLI reads and sends to a kernel: 4 MiB. A cell is one message to the gateway, whose
 * WebSocket takes at most 10 MiB per message (Tornado's default), and reading stops at the limit, so `/dev/zero`
 * or a multi-gigabyte file is refused instead of filling memory. Change it with `--max-source-size` or
 * `KERNELWARDEN_MAX_SOURCE_SIZE`.
 */
export const DEFAULT_MAX_SOURCE_BYTES = 4 * 1024 * 1024;

/** What is wrong with a source: a NUL character, bytes that are not UTF-8, or more than the size limit. */
export type SourceProblem = 'nul' | 'encoding' | 'too-large';

/**
 * A source the CLI refuses to send to a kernel (exit 2). ipykernel does not answer a cell with a NUL character
 * at all (it fails in its handler), and bytes that are not UTF-8 would reach it silently changed to U+FFFD.
 */
export class InvalidSourceError extends KernelwardenError {
  static override readonly brand: string = 'InvalidSourceError';
  /** The source as the message names it: a path, `standard input`, `-c CODE`, `the repl input`. */
  readonly source: string;
  readonly problem: SourceProblem;

  constructor(message: string, options: { source: string; problem: SourceProblem }) {
    super(message, { code: 'INVALID_SOURCE' });
    this.source = options.source;
    this.problem = options.problem;
  }
}

const UTF8_BOM = [0xef, 0xbb, 0xbf];
const CONVERT_HINT = 'save it as UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)';

/**
 * Turns a source's bytes into the code to run, or throws `InvalidSourceError`. A UTF-8 byte-order mark is dropped
 * (Python and R accept one in a file); a UTF-16 or UTF-32 byte-order mark, a NUL byte and any byte sequence that
 * is not UTF-8 are refused with where they are.
 */
export function decodeSource(bytes: Uint8Array, source: string, maxBytes: number): string {
  if (bytes.length > maxBytes) throw tooLarge(source, maxBytes);
  if ((bytes[0] === 0xff && bytes[1] === 0xfe) || (bytes[0] === 0xfe && bytes[1] === 0xff)) {
    throw new InvalidSourceError(`${source} is UTF-16 or UTF-32 (it starts with a byte-order mark): ${CONVERT_HINT}`, {
      source,
      problem: 'encoding',
    });
  }
  let body = bytes;
  if (UTF8_BOM.every((b, i) => bytes[i] === b)) body = bytes.subarray(3);
  const nul = body.indexOf(0);
  if (nul >= 0) {
    throw new InvalidSourceError(
      `${source} contains a NUL byte (${where(body, nul)}): kernels cannot run it; if it is UTF-16, ${CONVERT_HINT}`,
      { source, problem: 'nul' },
    );
  }
  const bad = firstInvalidUtf8(body);
  if (bad >= 0) {
    const byte = `0x${body[bad]!.toString(16).padStart(2, '0')}`;
    throw new InvalidSourceError(
      `${source} is not valid UTF-8 (byte ${byte} at ${where(body, bad)}): ${CONVERT_HINT}`,
      {
        source,
        problem: 'encoding',
      },
    );
  }
  return Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
}

/**
 * Checks code that arrived as text (`-c CODE`, a repl cell): no NUL character, at most `maxBytes` in UTF-8.
 * Returns it unchanged.
 */
export function checkSourceText(code: string, source: string, maxBytes: number): string {
  if (Buffer.byteLength(code, 'utf8') > maxBytes) throw tooLarge(source, maxBytes);
  const nul = code.indexOf('\0');
  if (nul >= 0) {
    const line = code.slice(0, nul).split('\n').length;
    throw new InvalidSourceError(`${source} contains a NUL character (line ${line}): kernels cannot run it`, {
      source,
      problem: 'nul',
    });
  }
  return code;
}

/** Reads a source file, never more than `maxBytes + 1` bytes (a device or a FIFO has no size to check first). */
export async function readSourceFile(path: string, source: string, maxBytes: number): Promise<string> {
  const handle = await open(path, 'r');
  try {
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const want = Math.min(1024 * 1024, maxBytes + 1 - total);
      const { bytesRead, buffer } = await handle.read(Buffer.alloc(want), 0, want, null);
      if (bytesRead === 0) break;
      chunks.push(buffer.subarray(0, bytesRead));
      total += bytesRead;
      if (total > maxBytes) throw tooLarge(source, maxBytes);
    }
    return decodeSource(Buffer.concat(chunks, total), source, maxBytes);
  } finally {
    await handle.close();
  }
}

/** Reads a source from a stream (standard input) up to `maxBytes`, then stops reading. */
export async function readSourceStream(
  stream: NodeJS.ReadableStream,
  source: string,
  maxBytes: number,
): Promise<string> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of stream) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : Buffer.from(chunk);
    chunks.push(bytes);
    total += bytes.length;
    if (total > maxBytes) throw tooLarge(source, maxBytes);
  }
  return decodeSource(Buffer.concat(chunks, total), source, maxBytes);
}

function tooLarge(source: string, maxBytes: number): InvalidSourceError {
  return new InvalidSourceError(
    `${source} is larger than the source limit of ${formatSize(maxBytes)}: pass --max-source-size to raise it`,
    { source, problem: 'too-large' },
  );
}

/** "line 3, byte 5" (both counted from 1; the byte within its line). */
function where(bytes: Uint8Array, offset: number): string {
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < offset; i++) {
    if (bytes[i] === 0x0a) {
      line++;
      lineStart = i + 1;
    }
  }
  return `line ${line}, byte ${offset - lineStart + 1}`;
}

/** The offset of the first byte that does not belong to a well-formed UTF-8 sequence, or -1. */
export function firstInvalidUtf8(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const length = utf8SequenceLength(bytes, i);
    if (length <= 0) return i;
    i += length;
  }
  return -1;
}

/**
 * The length of the well-formed UTF-8 sequence at `i`; 0 when the bytes there are not one, -1 when they are the
 * start of one cut off by the end of `bytes`.
 */
function utf8SequenceLength(bytes: Uint8Array, i: number): number {
  const lead = bytes[i]!;
  if (lead < 0x80) return 1;
  let need: number;
  let low = 0x80;
  let high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) need = 1;
  else if (lead >= 0xe0 && lead <= 0xef) {
    need = 2;
    if (lead === 0xe0) low = 0xa0; // overlong
    if (lead === 0xed) high = 0x9f; // UTF-16 surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    need = 3;
    if (lead === 0xf0) low = 0x90; // overlong
    if (lead === 0xf4) high = 0x8f; // past U+10FFFF
  } else return 0;
  for (let k = 1; k <= need; k++) {
    const next = bytes[i + k];
    if (next === undefined) return -1;
    if (next < (k === 1 ? low : 0x80) || next > (k === 1 ? high : 0xbf)) return 0;
  }
  return need + 1;
}

/**
 * What `markInvalidUtf8` puts in place of each byte that is not UTF-8: a lone (low) surrogate, which no decoded
 * UTF-8 text can contain, so a line holding one is known to have come from bad bytes (not from a typed U+FFFD).
 * Test for it with `hasInvalidBytes` (a surrogate pair also holds a low surrogate).
 */
export const INVALID_BYTE_MARK = '\udcff';

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** True when `text` (from `markInvalidUtf8`) holds a mark: some of its bytes were not UTF-8. */
export function hasInvalidBytes(text: string): boolean {
  return LONE_SURROGATE.test(text);
}

/** An input stream as readline uses it: a terminal's raw mode passes through. */
export type LineInput = Transform & { isTTY?: boolean; setRawMode?: (mode: boolean) => unknown };

/**
 * Decodes an input stream (the repl's standard input) as UTF-8 for readline, with `INVALID_BYTE_MARK` for each byte
 * that is not UTF-8 (readline itself would turn it into U+FFFD silently). Returns a stream of strings.
 */
export function markInvalidUtf8(input: NodeJS.ReadableStream & { isTTY?: boolean; setRawMode?: unknown }): {
  stream: LineInput;
  detach(): void;
} {
  let carry = Buffer.alloc(0);
  const stream: LineInput = new Transform({
    readableObjectMode: true,
    transform(chunk: Buffer | string, _encoding, done) {
      const fresh = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
      const bytes = carry.length > 0 ? Buffer.concat([carry, fresh]) : fresh;
      let text = '';
      let start = 0;
      let i = 0;
      while (i < bytes.length) {
        const length = utf8SequenceLength(bytes, i);
        if (length > 0) i += length;
        else if (length < 0) break;
        else {
          text += bytes.toString('utf8', start, i) + INVALID_BYTE_MARK;
          i++;
          start = i;
        }
      }
      text += bytes.toString('utf8', start, i);
      carry = Buffer.from(bytes.subarray(i));
      if (text !== '') this.push(text);
      done();
    },
    flush(done) {
      if (carry.length > 0) this.push(INVALID_BYTE_MARK.repeat(carry.length));
      done();
    },
  });
  if (input.isTTY) stream.isTTY = true;
  const setRawMode = input.setRawMode;
  if (typeof setRawMode === 'function') stream.setRawMode = (mode) => setRawMode.call(input, mode);
  input.pipe(stream);
  return {
    stream,
    detach: () => {
      input.unpipe(stream);
      input.pause();
    },
  };
}
