import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { runWithCompileCache } from './compile-cache.js';

/** A script with enough functions for V8 to cache, whose answer is `answer` (one character, so builds keep length). */
function script(answer: string): string {
  return [
    `const helper = require('./helper.cjs');`,
    'function square(n) { return n * n; }',
    'function sum(list) { let total = 0; for (const n of list) total += square(n); return total; }',
    `module.exports = { answer: () => '${answer}' + helper.suffix, sum, file: __filename, dir: __dirname, self: this === module.exports };`,
  ].join('\n');
}

describe('runWithCompileCache', () => {
  // Each load here stands for a process of its own: V8's in-memory cache of compiled scripts would otherwise answer
  // a second load of the same source before the cache file is even looked at.
  beforeAll(() => setFlagsFromString('--no-compilation-cache'));
  afterAll(() => setFlagsFromString('--compilation-cache'));

  let dir: string;
  let file: string;
  let cacheFile: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'kw-compile-cache-'));
    file = join(dir, 'script.cjs');
    cacheFile = join(dir, '.compile-cache', 'run.bin');
    writeFileSync(join(dir, 'helper.cjs'), "module.exports = { suffix: '!' };");
    writeFileSync(file, script('a'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  type Exports = { answer(): string; sum(list: number[]): number; file: string; dir: string; self: boolean };

  it('runs the script as a CommonJS module: its exports, require beside it, __filename, __dirname and this', () => {
    const loaded = runWithCompileCache<Exports>(file, { cacheFile });
    expect(loaded.exports.answer()).toBe('a!');
    expect(loaded.exports.sum([1, 2, 3])).toBe(14);
    expect(loaded.exports.file).toBe(file);
    expect(loaded.exports.dir).toBe(dir);
    expect(loaded.exports.self).toBe(true);
  });

  it('says missing at first, writes the cache on save, and V8 takes it on the next load', () => {
    const first = runWithCompileCache<Exports>(file, { cacheFile });
    expect(first.cache).toBe('missing');
    first.exports.sum([1]);
    first.save(0);
    expect(readFileSync(cacheFile).subarray(0, 30).toString()).toContain('kernelwarden-compile-cache');

    const second = runWithCompileCache<Exports>(file, { cacheFile });
    expect(second.cache).toBe('used');
    expect(second.cachedExitCode).toBe(0);
    expect(second.exports.answer()).toBe('a!');
  });

  it('never runs the cache of another build of the script, even one of the same length', () => {
    runWithCompileCache<Exports>(file, { cacheFile }).save(0);
    writeFileSync(file, script('b'));
    expect(readFileSync(file).length).toBe(script('a').length);

    const rebuilt = runWithCompileCache<Exports>(file, { cacheFile });
    expect(rebuilt.cache).toBe('stale');
    expect(rebuilt.exports.answer()).toBe('b!');
    expect(rebuilt.refresh(0)).toBe(true);
    expect(runWithCompileCache<Exports>(file, { cacheFile }).cache).toBe('used');
  });

  it('runs the script compiled afresh when V8 refuses the cache, and replaces it on refresh', () => {
    runWithCompileCache<Exports>(file, { cacheFile }).save(0);
    const bytes = readFileSync(cacheFile);
    const header = bytes.subarray(0, bytes.indexOf(10) + 1);
    writeFileSync(cacheFile, Buffer.concat([header, Buffer.alloc(4096, 7)]));

    const loaded = runWithCompileCache<Exports>(file, { cacheFile });
    expect(loaded.cache).toBe('rejected');
    expect(loaded.exports.answer()).toBe('a!');
    expect(loaded.refresh(0)).toBe(true);
    expect(runWithCompileCache<Exports>(file, { cacheFile }).cache).toBe('used');
  });

  it('takes a file that is not a cache of its own for a missing cache', () => {
    mkdirSync(join(dir, '.compile-cache'));
    writeFileSync(cacheFile, 'something else entirely\nwith lines');
    expect(runWithCompileCache<Exports>(file, { cacheFile }).cache).toBe('missing');
  });

  it('refreshes a cache left by a failed run once a run ends well, and only then', () => {
    runWithCompileCache<Exports>(file, { cacheFile }).save(1);
    const afterFailure = runWithCompileCache<Exports>(file, { cacheFile });
    expect(afterFailure.cache).toBe('used');
    expect(afterFailure.cachedExitCode).toBe(1);
    expect(afterFailure.refresh(1)).toBe(false);
    expect(afterFailure.refresh(0)).toBe(true);

    const afterSuccess = runWithCompileCache<Exports>(file, { cacheFile });
    expect(afterSuccess.cachedExitCode).toBe(0);
    const written = statSync(cacheFile).mtimeMs;
    expect(afterSuccess.refresh(0)).toBe(false);
    expect(afterSuccess.refresh(1)).toBe(false);
    expect(statSync(cacheFile).mtimeMs).toBe(written);
  });

  it('runs without a cache when none is named, and writes nothing', () => {
    const loaded = runWithCompileCache<Exports>(file, { cacheFile: undefined });
    expect(loaded.cache).toBe('off');
    expect(loaded.refresh(0)).toBe(false);
    loaded.save(0);
    expect(() => statSync(join(dir, '.compile-cache'))).toThrow();
  });

  it('does not throw when the cache cannot be written, and the next load compiles again', () => {
    writeFileSync(join(dir, 'not-a-dir'), '');
    const unwritable = join(dir, 'not-a-dir', 'run.bin');
    const loaded = runWithCompileCache<Exports>(file, { cacheFile: unwritable });
    expect(() => loaded.save(0)).not.toThrow();
    expect(runWithCompileCache<Exports>(file, { cacheFile: unwritable }).cache).toBe('missing');
  });
});
