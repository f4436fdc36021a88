import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InvalidOptionsError } from '@kernelwarden/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { IsolationPolicyError } from './errors.js';
import { createKernelPolicy, createReadIsolationPolicy } from './policy.js';

let base: string;
let temp: string;

beforeEach(() => {
  base = realpathSync(mkdtempSync(join(tmpdir(), 'kw-policy-')));
  temp = join(base, 'canonical-temp');
  mkdirSync(temp);
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

function dir(...parts: string[]): string {
  const path = join(base, ...parts);
  mkdirSync(path, { recursive: true });
  return path;
}

describe('createReadIsolationPolicy', () => {
  it('returns frozen canonical roots, allowed roots and the temp dir it checked against', () => {
    const data = dir('data');
    const inputs = dir('data', 'inputs');
    const policy = createReadIsolationPolicy({
      roots: [{ path: `${data}/./`, label: 'data directory' }],
      allowedRoots: [
        { path: inputs, label: 'inputs' },
        { path: inputs, label: 'inputs again' },
      ],
      tempDir: temp,
    });
    expect(policy).toEqual({ roots: [data], allowedRoots: [inputs], tempDir: temp });
    expect(Object.isFrozen(policy) && Object.isFrozen(policy.roots) && Object.isFrozen(policy.allowedRoots)).toBe(true);
  });

  it('refuses a root that is a symbolic link, or passes through one, naming its label', () => {
    const real = dir('real');
    dir('real', 'inner');
    symlinkSync(real, join(base, 'link'));
    for (const path of [join(base, 'link'), join(base, 'link', 'inner')]) {
      expect(() =>
        createReadIsolationPolicy({ roots: [{ path, label: 'lab data' }], allowedRoots: [], tempDir: temp }),
      ).toThrow(/^lab data cannot be isolated: /);
    }
  });

  it('refuses an allowed root behind a symbolic link', () => {
    const data = dir('data');
    dir('outside');
    symlinkSync(join(base, 'outside'), join(data, 'inputs'));
    expect(() =>
      createReadIsolationPolicy({
        roots: [{ path: data, label: 'data' }],
        allowedRoots: [{ path: join(data, 'inputs'), label: 'Artifact input scope' }],
        tempDir: temp,
      }),
    ).toThrow(/Artifact input scope cannot be isolated/);
  });

  it('refuses roots that nest, in either order, and equal roots', () => {
    const outer = dir('outer');
    const inner = dir('outer', 'inner');
    for (const pair of [
      [outer, inner],
      [inner, outer],
      [outer, outer],
    ]) {
      expect(() =>
        createReadIsolationPolicy({
          roots: pair.map((path, i) => ({ path: path!, label: `root ${i}` })),
          tempDir: temp,
        }),
      ).toThrow(/must not overlap/);
    }
  });

  it('refuses a root inside, equal to, or containing the canonical system temporary directory', () => {
    const inside = dir('canonical-temp', 'lab-root');
    for (const path of [inside, temp, base]) {
      const attempt = () => createReadIsolationPolicy({ roots: [{ path, label: 'data root' }], tempDir: temp });
      expect(attempt).toThrow(IsolationPolicyError);
      expect(attempt).toThrow(/must not overlap the canonical system temporary directory/);
    }
  });

  it('refuses an allowed root that would re-expose a whole hidden root', () => {
    const data = dir('area', 'data');
    expect(() =>
      createReadIsolationPolicy({
        roots: [{ path: data, label: 'data' }],
        allowedRoots: [{ path: join(base, 'area'), label: 'area' }],
        tempDir: temp,
      }),
    ).toThrow(/area .* must not contain the hidden data/);
  });

  it('reads the disk only: a missing root is refused and still missing afterwards', () => {
    const missing = join(base, 'nope', 'data');
    expect(() => createReadIsolationPolicy({ roots: [{ path: missing, label: 'data' }], tempDir: temp })).toThrow(
      /data does not exist/,
    );
    expect(existsSync(join(base, 'nope'))).toBe(false);
  });

  it('names the bad field of malformed options', () => {
    try {
      createReadIsolationPolicy({ roots: [{ path: 'relative/dir', label: 'x' }] });
      expect.unreachable();
    } catch (error) {
      expect(InvalidOptionsError.isInstance(error)).toBe(true);
      expect((error as InvalidOptionsError).path).toBe('roots.0.path');
    }
    expect(() => createReadIsolationPolicy({ roots: [] })).toThrow(/roots/);
  });

  it('gives IsolationPolicyError a stable code', () => {
    try {
      createReadIsolationPolicy({ roots: [{ path: join(base, 'missing'), label: 'x' }], tempDir: temp });
    } catch (error) {
      expect(IsolationPolicyError.isInstance(error)).toBe(true);
      expect((error as IsolationPolicyError).code).toBe('ISOLATION_POLICY');
    }
  });
});

describe('createKernelPolicy', () => {
  it('makes a limits-only policy: no roots, the limits kept, network: true left out as the default it is', () => {
    const policy = createKernelPolicy({
      memoryBytes: 512 * 1024 * 1024,
      maxProcesses: 64,
      cpuSeconds: 2.5,
      network: true,
      tempDir: temp,
    });
    expect(policy).toEqual({
      roots: [],
      allowedRoots: [],
      tempDir: temp,
      memoryBytes: 512 * 1024 * 1024,
      maxProcesses: 64,
      cpuSeconds: 2.5,
    });
    expect('network' in policy).toBe(false);
    expect(Object.isFrozen(policy)).toBe(true);
    expect(createKernelPolicy({ network: false, tempDir: temp }).network).toBe(false);
  });

  it('combines limits with hidden roots, checked as createReadIsolationPolicy checks them', () => {
    const data = dir('data');
    expect(createKernelPolicy({ roots: [{ path: data, label: 'data' }], network: false, tempDir: temp })).toEqual({
      roots: [data],
      allowedRoots: [],
      tempDir: temp,
      network: false,
    });
    expect(
      createReadIsolationPolicy({ roots: [{ path: data, label: 'data' }], memoryBytes: 1 << 30, tempDir: temp }),
    ).toMatchObject({ roots: [data], memoryBytes: 1 << 30 });
    expect(() => createKernelPolicy({ roots: [{ path: base, label: 'all' }], tempDir: temp })).toThrow(
      /must not overlap the canonical system temporary directory/,
    );
  });

  it('names the field of every malformed limit', () => {
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ memoryBytes: 0 }, 'memoryBytes', /at least 268435456 bytes \(256 MiB\)/],
      [{ memoryBytes: 1.5e9 + 0.5 }, 'memoryBytes', /whole number/],
      [{ memoryBytes: '512M' }, 'memoryBytes', /whole number/],
      [{ maxProcesses: 4 }, 'maxProcesses', /at least 16/],
      [{ maxProcesses: Number.NaN }, 'maxProcesses', /whole number/],
      [{ cpuSeconds: 0 }, 'cpuSeconds', /above 0/],
      [{ cpuSeconds: Number.POSITIVE_INFINITY }, 'cpuSeconds', /above 0/],
      [{ network: 'no' }, 'network', /true or false/],
    ];
    for (const [limits, path, message] of cases) {
      try {
        createKernelPolicy({ ...limits, tempDir: temp } as never);
        expect.unreachable();
      } catch (error) {
        expect(InvalidOptionsError.isInstance(error), path).toBe(true);
        expect((error as InvalidOptionsError).path).toBe(path);
        expect((error as Error).message).toMatch(message);
      }
    }
    try {
      createReadIsolationPolicy({ roots: [{ path: dir('d'), label: 'd' }], cpuSeconds: -1, tempDir: temp });
      expect.unreachable();
    } catch (error) {
      expect((error as InvalidOptionsError).path).toBe('cpuSeconds');
    }
  });
});
