import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { parseSize } from './size.js';
import {
  checkSourceText,
  DEFAULT_MAX_SOURCE_BYTES,
  decodeSource,
  firstInvalidUtf8,
  hasInvalidBytes,
  INVALID_BYTE_MARK,
  InvalidSourceError,
  markInvalidUtf8,
  readSourceFile,
  readSourceStream,
} from './source-input.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function refusal(run: () => unknown): InvalidSourceError {
  try {
    run();
  } catch (error) {
    if (InvalidSourceError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('accepted');
}

async function refusalOf(promise: Promise<unknown>): Promise<InvalidSourceError> {
  const error = await promise.then(
    () => new Error('accepted'),
    (e: unknown) => e,
  );
  if (InvalidSourceError.isInstance(error)) return error;
  throw error;
}

describe('decodeSource', () => {
  it('decodes UTF-8 and drops a UTF-8 byte-order mark', () => {
    expect(decodeSource(Buffer.from('print("ü 日本")\n'), 'a.py', 100)).toBe('print("ü 日本")\n');
    expect(decodeSource(Buffer.from('\ufeffprint(1)\n'), 'a.py', 100)).toBe('print(1)\n');
  });

  it('refuses a NUL byte, naming the file, the line and the byte', () => {
    const error = refusal(() => decodeSource(Buffer.from('print(1)\nx = 1\0\n'), 'job.py', 100));
    expect(error.code).toBe('INVALID_SOURCE');
    expect(error.problem).toBe('nul');
    expect(error.message).toBe(
      'job.py contains a NUL byte (line 2, byte 6): kernels cannot run it; if it is UTF-16, save it as UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)',
    );
  });

  it('refuses UTF-16 with a byte-order mark, and without one (by its NUL bytes)', () => {
    const le = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('print(1)\n', 'utf16le')]);
    expect(refusal(() => decodeSource(le, 'w.py', 100)).message).toMatch(/^w\.py is UTF-16 or UTF-32 .*UTF-8/);
    const be = Buffer.from([0xfe, 0xff, 0x00, 0x70]);
    expect(refusal(() => decodeSource(be, 'w.py', 100)).problem).toBe('encoding');
    expect(refusal(() => decodeSource(Buffer.from('print(1)\n', 'utf16le'), 'w.py', 100)).problem).toBe('nul');
  });

  it('refuses bytes that are not UTF-8, naming the byte and where it is', () => {
    const latin1 = Buffer.from('# caf\xe9\nprint(1)\n', 'latin1');
    expect(refusal(() => decodeSource(latin1, 'l.py', 100)).message).toBe(
      'l.py is not valid UTF-8 (byte 0xe9 at line 1, byte 6): save it as UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)',
    );
  });

  it('refuses a source over the limit', () => {
    const error = refusal(() => decodeSource(Buffer.alloc(11, 0x61), 'big.py', 10));
    expect(error.problem).toBe('too-large');
    expect(error.message).toBe(
      'big.py is larger than the source limit of 10 bytes: pass --max-source-size to raise it',
    );
  });
});

describe('firstInvalidUtf8', () => {
  it('agrees with a strict decoder on any bytes', () => {
    const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 24 }), (bytes) => {
        let valid = true;
        try {
          strict.decode(bytes);
        } catch {
          valid = false;
        }
        expect(firstInvalidUtf8(bytes) === -1).toBe(valid);
      }),
      { numRuns: 5000 },
    );
  });
});

describe('checkSourceText', () => {
  it('passes code through, refuses a NUL character and a size over the limit in UTF-8 bytes', () => {
    expect(checkSourceText('print(1)', '-c CODE', 100)).toBe('print(1)');
    expect(refusal(() => checkSourceText('a\nb\0', '-c CODE', 100)).message).toBe(
      '-c CODE contains a NUL character (line 2): kernels cannot run it',
    );
    expect(refusal(() => checkSourceText('ü'.repeat(6), 'the repl input', 11)).problem).toBe('too-large');
  });
});

describe('readSourceFile and readSourceStream', () => {
  it('stops reading /dev/zero at the limit and refuses it', async () => {
    const error = await refusalOf(readSourceFile('/dev/zero', '/dev/zero', DEFAULT_MAX_SOURCE_BYTES));
    expect(error.problem).toBe('too-large');
    expect(error.message).toMatch(/^\/dev\/zero is larger than the source limit of 4 MiB/);
  });

  it('reads a file at the limit and refuses one byte more', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kw-source-'));
    dirs.push(dir);
    writeFileSync(join(dir, 'ok.py'), 'x'.repeat(1000));
    writeFileSync(join(dir, 'big.py'), 'x'.repeat(1001));
    expect(await readSourceFile(join(dir, 'ok.py'), 'ok.py', 1000)).toHaveLength(1000);
    expect((await refusalOf(readSourceFile(join(dir, 'big.py'), 'big.py', 1000))).problem).toBe('too-large');
  });

  it('stops reading an endless stream at the limit', async () => {
    let produced = 0;
    const endless = new Readable({
      read() {
        produced += 65536;
        this.push(Buffer.alloc(65536, 0x61));
      },
    });
    const error = await refusalOf(readSourceStream(endless, 'standard input', 1_000_000));
    expect(error.message).toMatch(/^standard input is larger than the source limit/);
    expect(produced).toBeLessThan(2_000_000);
  });

  it('checks what a stream gave like a file', async () => {
    const error = await refusalOf(readSourceStream(Readable.from([Buffer.from([0x61, 0xff])]), 'standard input', 10));
    expect(error.message).toMatch(/^standard input is not valid UTF-8 \(byte 0xff/);
  });
});

describe('markInvalidUtf8', () => {
  it('passes UTF-8 through whatever the chunking, and marks each byte that is not UTF-8', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.oneof(
            fc.string({ unit: 'grapheme' }).map((s) => Buffer.from(s)),
            fc.uint8Array({ maxLength: 4 }),
          ),
          {
            maxLength: 8,
          },
        ),
        async (parts) => {
          const input = new PassThrough();
          const guarded = markInvalidUtf8(input);
          for (const part of parts) input.write(part);
          input.end();
          const out = (await guarded.stream.toArray()).join('');
          const bytes = Buffer.concat(parts);
          const valid = firstInvalidUtf8(bytes) === -1;
          expect(hasInvalidBytes(out)).toBe(!valid);
          if (valid) expect(out).toBe(bytes.toString('utf8'));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('marks the bad byte inside a line and keeps the rest', async () => {
    const input = new PassThrough();
    const guarded = markInvalidUtf8(input);
    input.end(Buffer.from([0x61, 0xff, 0x62, 0x0a]));
    expect(await text(guarded.stream)).toBe(`a${INVALID_BYTE_MARK}b\n`);
  });
});

describe('parseSize', () => {
  it('reads bytes and binary units', () => {
    expect(parseSize('100')).toBe(100);
    expect(parseSize('512k')).toBe(512 * 1024);
    expect(parseSize('16M')).toBe(16 * 1024 * 1024);
    expect(parseSize('1.5 MiB')).toBe(1.5 * 1024 * 1024);
    expect(parseSize('1 GB')).toBe(1024 ** 3);
    expect(parseSize('12 parsecs')).toBeUndefined();
    expect(parseSize('-1')).toBeUndefined();
  });
});
