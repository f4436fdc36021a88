import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { writeFileAtomic } from './atomic-file.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'kw-atomic-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('writeFileAtomic', () => {
  it('writes a new file with the mode asked for, and nothing else in the directory', () => {
    const path = join(dir, 'state.json');
    writeFileAtomic(path, '{"a":1}', { mode: 0o600 });
    expect(readFileSync(path, 'utf8')).toBe('{"a":1}');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir)).toEqual(['state.json']);
  });

  it('replaces an existing file by a rename (a new inode: a reader that opened the old one keeps reading it)', () => {
    const path = join(dir, 'cache');
    writeFileSync(path, 'old content, longer than the new');
    const before = statSync(path).ino;
    writeFileAtomic(path, 'new', { mode: 0o644 });
    expect(readFileSync(path, 'utf8')).toBe('new');
    expect(statSync(path).ino).not.toBe(before);
    expect(readdirSync(dir)).toEqual(['cache']);
  });

  it('writes several pieces, text and bytes, in order', () => {
    const path = join(dir, 'cache');
    const bytes = new Uint8Array(256 * 1024).map((_, i) => i % 251);
    writeFileAtomic(path, ['header\t1\n', bytes, Buffer.from('end')], { mode: 0o644 });
    const written = readFileSync(path);
    expect(written.subarray(0, 9).toString()).toBe('header\t1\n');
    expect(written.subarray(9, 9 + bytes.length).equals(bytes)).toBe(true);
    expect(written.subarray(9 + bytes.length).toString()).toBe('end');
  });

  it('throws when the rename fails, and leaves no temporary file', () => {
    const path = join(dir, 'taken');
    mkdirSync(join(path, 'inside'), { recursive: true });
    expect(() => writeFileAtomic(path, 'x', { mode: 0o600 })).toThrow(/EISDIR|ENOTEMPTY|EEXIST/);
    expect(readdirSync(dir)).toEqual(['taken']);
  });

  it('throws when the directory does not exist, creating nothing', () => {
    expect(() => writeFileAtomic(join(dir, 'missing', 'file'), 'x', { mode: 0o600 })).toThrow(/ENOENT/);
    expect(readdirSync(dir)).toEqual([]);
  });
});
