import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { lazy, lazyModule } from './lazy.js';

describe('lazy', () => {
  it('builds on the first call only, and again after a build that threw', () => {
    let calls = 0;
    const value = lazy(() => {
      calls++;
      if (calls === 1) throw new Error('not yet');
      return { calls };
    });
    expect(value).toThrow('not yet');
    expect(value()).toBe(value());
    expect(calls).toBe(2);
  });
});

describe('lazyModule', () => {
  let root: string;
  let parentUrl: string;
  const flag = globalThis as { __KERNELWARDEN_INLINED__?: boolean };

  beforeAll(() => {
    // A package that ships an ES module entry and a CommonJS one, installed where `parentUrl` resolves it.
    root = mkdtempSync(join(tmpdir(), 'kw-lazy-'));
    const pkg = join(root, 'node_modules', 'dual');
    mkdirSync(pkg, { recursive: true });
    writeFileSync(
      join(pkg, 'package.json'),
      JSON.stringify({
        name: 'dual',
        type: 'module',
        exports: { '.': { import: './esm.js', require: './cjs.cjs' }, './package.json': './package.json' },
      }),
    );
    writeFileSync(join(pkg, 'esm.js'), "export const kind = 'esm';");
    writeFileSync(join(pkg, 'cjs.cjs'), "exports.kind = 'cjs';");
    parentUrl = pathToFileURL(join(root, 'index.js')).href;
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  afterEach(() => {
    delete flag.__KERNELWARDEN_INLINED__;
  });

  it('loads the ES module entry of a package resolved from the caller, on first use, without the bundled copy', () => {
    const bundled = vi.fn(() => ({ kind: 'bundled' }));
    const load = lazyModule<{ kind: string }>('dual', parentUrl, bundled);
    expect(load().kind).toBe('esm');
    expect(load()).toBe(load());
    expect(bundled).not.toHaveBeenCalled();
  });

  it('falls back to the bundled copy when the package cannot be resolved, and fails without one', () => {
    expect(lazyModule('absent-package', parentUrl, () => ({ kind: 'bundled' }))()).toEqual({ kind: 'bundled' });
    expect(() => lazyModule('absent-package', parentUrl)()).toThrow(/absent-package/);
  });

  it('loads the inlined copy first in a build that inlines every package', () => {
    flag.__KERNELWARDEN_INLINED__ = true;
    expect(lazyModule('dual', parentUrl, () => ({ kind: 'bundled' }))()).toEqual({ kind: 'bundled' });
    expect(lazyModule<{ kind: string }>('dual', parentUrl)().kind).toBe('esm');
  });
});
