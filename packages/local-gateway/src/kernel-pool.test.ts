import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { callRecorder } from './dir-watch.test-fixture.js';
import {
  abandonedClaims,
  addReadyKernel,
  claimPooledKernel,
  clearPool,
  KEPT_POOL_MS,
  keepPooled,
  MAX_KEPT_POOLS,
  readPoolConfig,
  readyKernels,
  takeSurplus,
  watchPoolClaims,
  writePoolConfig,
} from './kernel-pool.js';
import { gatewayLayout } from './layout.js';
import { listOwners } from './ownership.js';
import { ensurePrivateDir, writePrivateFileAtomic } from './state-dir.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function layout() {
  const dir = mkdtempSync(join(tmpdir(), 'kw-pool-'));
  dirs.push(dir);
  const l = gatewayLayout(dir);
  for (const d of [l.owners, l.pool, l.poolClaims]) ensurePrivateDir(d);
  return l;
}

describe('the pool files', () => {
  it('hands each ready kernel to one claim only, and records the claimant as its owner', () => {
    const l = layout();
    addReadyKernel(l, 'python3', 'k1');
    addReadyKernel(l, 'python3', 'k2');
    const claims = [claimPooledKernel(l, 'python3'), claimPooledKernel(l, 'python3'), claimPooledKernel(l, 'python3')];
    expect(claims.slice(0, 2).sort()).toEqual(['k1', 'k2']);
    expect(claims[2]).toBeUndefined();
    expect(
      listOwners(l.owners)
        .map((r) => [r.kernelId, r.owner.pid])
        .sort(),
    ).toEqual([
      ['k1', process.pid],
      ['k2', process.pid],
    ]);
    expect(readdirSync(l.poolClaims)).toEqual([]);
    expect(claimPooledKernel(l, 'ir')).toBeUndefined();
  });

  it('finds claims whose claimant died before recording itself, and leaves a live claimant alone', () => {
    const l = layout();
    writePrivateFileAtomic(join(l.poolClaims, 'dead~999999999~'), '{}');
    writePrivateFileAtomic(join(l.poolClaims, `live~${process.pid}~`), '{}');
    writePrivateFileAtomic(join(l.poolClaims, 'owned~999999998~'), '{}');
    writePrivateFileAtomic(join(l.owners, 'owned'), JSON.stringify({ pid: process.pid }));
    expect(abandonedClaims(l)).toEqual(['dead']);
    expect(readdirSync(l.poolClaims)).toEqual([`live~${process.pid}~`]);
  });

  it('keeps the wanted counts and takes out the surplus, oldest kept', () => {
    const l = layout();
    writePoolConfig(l, { python3: 1, ir: 2 });
    expect(readPoolConfig(l)).toEqual({ python3: 1, ir: 2 });
    addReadyKernel(l, 'python3', 'a');
    addReadyKernel(l, 'python3', 'b');
    expect(readyKernels(l, 'python3')).toHaveLength(2);
    const taken = takeSurplus(l, 'python3', 1);
    expect(taken).toHaveLength(1);
    expect(readyKernels(l, 'python3')).toHaveLength(1);
    expect(readyKernels(l, '../python3')).toEqual([]);
  });

  it("pools a kept kernelspec with its base's count while its spec exists and it was asked for recently", () => {
    const l = layout();
    const spec = (name: string) => {
      ensurePrivateDir(join(l.kernelSpecDir, name));
      writePrivateFileAtomic(join(l.kernelSpecDir, name, 'kernel.json'), '{}');
    };
    writePoolConfig(l, { python3: 2 });
    spec('kw-iso-python3-aaaa');
    keepPooled(l, 'kw-iso-python3-aaaa', 'python3');
    keepPooled(l, 'kw-iso-ir-bbbb', 'ir'); // no ir count: not pooled
    keepPooled(l, 'kw-iso-python3-gone', 'python3'); // no spec: not pooled
    keepPooled(l, '../escape', 'python3');
    expect(readPoolConfig(l)).toEqual({ python3: 2, 'kw-iso-python3-aaaa': 2 });
    // Not asked for within KEPT_POOL_MS: no longer pooled.
    expect(readPoolConfig(l, Date.now() + KEPT_POOL_MS + 1)).toEqual({ python3: 2 });
    // The base's count turned off turns the kept one off too.
    writePoolConfig(l, { python3: 0 });
    expect(readPoolConfig(l)).toEqual({});
    writePoolConfig(l, { python3: 1 });
    // At most MAX_KEPT_POOLS, the most recently asked for.
    for (let i = 0; i < MAX_KEPT_POOLS + 2; i++) {
      spec(`kw-iso-python3-${i}`);
      keepPooled(l, `kw-iso-python3-${i}`, 'python3');
      writePrivateFileAtomic(
        join(l.poolKept, `kw-iso-python3-${i}`),
        JSON.stringify({ like: 'python3', at: Date.now() + 1000 + i }),
      );
    }
    const kept = Object.keys(readPoolConfig(l)).filter((name) => name !== 'python3');
    expect(kept.sort()).toEqual(Array.from({ length: MAX_KEPT_POOLS }, (_, i) => `kw-iso-python3-${i + 2}`).sort());
    clearPool(l);
    expect(readdirSync(l.poolKept)).toEqual([]);
  });
});

describe('watchPoolClaims', () => {
  it('calls back as soon as a pooled kernel is claimed, not when one is put into the pool', async () => {
    const l = layout();
    addReadyKernel(l, 'python3', 'k1');
    addReadyKernel(l, 'python3', 'k2');
    addReadyKernel(l, 'python3', 'k3');
    const { callback, calls, next } = callRecorder();
    const watching = watchPoolClaims(l.poolClaims, callback);
    try {
      // A kernel put into the pool is no claim.
      addReadyKernel(l, 'python3', 'k4');
      await new Promise((r) => setTimeout(r, 100));
      expect(calls()).toBe(0);

      let change = next();
      expect(claimPooledKernel(l, 'python3')).toBe('k1');
      await change;
      await new Promise((r) => setTimeout(r, 100));
      expect(calls()).toBe(1);

      change = next();
      expect(claimPooledKernel(l, 'python3')).toBe('k2');
      await change;
      expect(calls()).toBeGreaterThanOrEqual(2);
      expect(readyKernels(l, 'python3').sort()).toEqual(['k3', 'k4']);
    } finally {
      watching.close();
    }
  });

  it('leaves a missing directory to the looks', () => {
    const l = layout();
    expect(() => watchPoolClaims(join(l.dir, 'absent'), () => {}).close()).not.toThrow();
  });
});
