import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { addLease, LEASE_SETTLE_MS, watchLeaseReleases } from './leases.js';
import { ensurePrivateDir, removeFile } from './state-dir.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function leasesDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'kw-leases-'));
  dirs.push(dir);
  const leases = join(dir, 'leases');
  ensurePrivateDir(leases);
  return leases;
}

describe('watchLeaseReleases', () => {
  it('calls back once a lease is given back, not when one is taken, a burst of releases making one call', async () => {
    const leases = leasesDir();
    let calls = 0;
    let called: () => void = () => {};
    const next = () =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no call within 5 s')), 5000);
        called = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    const watching = watchLeaseReleases(leases, () => {
      calls++;
      called();
    });
    try {
      const first = addLease(leases, 0); // a temporary file renamed into place
      const second = addLease(leases, 0);
      await new Promise((r) => setTimeout(r, 2 * LEASE_SETTLE_MS));
      expect(calls).toBe(0);

      const change = next();
      removeFile(first);
      removeFile(second);
      await change;
      await new Promise((r) => setTimeout(r, 2 * LEASE_SETTLE_MS));
      expect(calls).toBe(1);
    } finally {
      watching.close();
    }
  });

  it('leaves a missing directory to the looks', () => {
    const parent = mkdtempSync(join(tmpdir(), 'kw-leases-'));
    dirs.push(parent);
    expect(() => watchLeaseReleases(join(parent, 'absent'), () => {}).close()).not.toThrow();
  });
});
