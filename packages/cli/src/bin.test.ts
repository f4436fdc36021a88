import { spawnSync } from 'node:child_process';
import {
  appendFileSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

const DIST = resolve(dirname(fileURLToPath(import.meta.url)), '../dist');

/** The built command, copied with its bundle into a directory of the test's own (its cache goes beside them). */
describe('the kernelwarden command (dist/bin.cjs) and its compile cache', () => {
  let dist: string;
  const cache = () => join(dist, '.compile-cache', 'help.bin');
  const header = () => {
    const bytes = readFileSync(cache());
    return bytes.subarray(0, bytes.indexOf(10)).toString();
  };
  const help = (env: Record<string, string> = {}) => {
    const ran = spawnSync(process.execPath, [join(dist, 'bin.cjs'), 'help'], {
      env: { ...process.env, ...env },
      encoding: 'utf8',
    });
    expect(ran.stderr).toBe('');
    expect(ran.status).toBe(0);
    expect(ran.stdout).toContain('Usage:');
    return ran.stdout;
  };

  beforeEach(() => {
    dist = join(mkdtempSync(join(tmpdir(), 'kw-bin-')), 'dist');
    mkdirSync(dist);
    for (const name of ['bin.cjs', 'kernelwarden.cjs']) copyFileSync(join(DIST, name), join(dist, name));
  });
  afterEach(() => rmSync(dirname(dist), { recursive: true, force: true }));

  it('writes the cache of a command on its first run, then starts from it without writing it again', () => {
    const first = help();
    expect(header()).toMatch(/^kernelwarden-compile-cache 1\t.+\t0$/);
    const written = statSync(cache()).mtimeMs;
    expect(help()).toBe(first);
    expect(statSync(cache()).mtimeMs).toBe(written);
  });

  it('writes a new cache once the CLI was rebuilt, and runs the new build', () => {
    help();
    const before = header();
    appendFileSync(join(dist, 'kernelwarden.cjs'), '\n// rebuilt\n');
    help();
    expect(header()).not.toBe(before);
  });

  it('writes nothing with KERNELWARDEN_COMPILE_CACHE=0', () => {
    help({ KERNELWARDEN_COMPILE_CACHE: '0' });
    expect(existsSync(join(dist, '.compile-cache'))).toBe(false);
  });
});
