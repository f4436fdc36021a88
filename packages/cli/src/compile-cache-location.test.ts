import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { COMPILE_CACHE_ENV, compileCacheFile } from './compile-cache-location.js';

describe('compileCacheFile', () => {
  it('keeps a cache per command beside the CLI, one for whatever is no command, and help for none', () => {
    expect(compileCacheFile('/opt/kw/dist', ['run', '-c', '1'], {})).toBe(
      join('/opt/kw/dist', '.compile-cache', 'run.bin'),
    );
    expect(compileCacheFile('/d', ['mcp'], {})).toBe(join('/d', '.compile-cache', 'mcp.bin'));
    expect(compileCacheFile('/d', ['gateway', 'status'], {})).toBe(join('/d', '.compile-cache', 'gateway.bin'));
    expect(compileCacheFile('/d', ['--version'], {})).toBe(join('/d', '.compile-cache', 'other.bin'));
    expect(compileCacheFile('/d', ['../../etc/passwd'], {})).toBe(join('/d', '.compile-cache', 'other.bin'));
    expect(compileCacheFile('/d', [], {})).toBe(join('/d', '.compile-cache', 'help.bin'));
  });

  it(`is off with ${COMPILE_CACHE_ENV}=0`, () => {
    expect(compileCacheFile('/d', ['run'], { [COMPILE_CACHE_ENV]: '0' })).toBeUndefined();
    expect(compileCacheFile('/d', ['run'], { [COMPILE_CACHE_ENV]: '1' })).toBe(join('/d', '.compile-cache', 'run.bin'));
  });
});
