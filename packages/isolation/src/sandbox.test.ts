import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { IsolationUnavailableError } from './errors.js';
import { assertSandbox, detectSandbox } from './sandbox.js';

describe('detectSandbox', () => {
  it('finds a working bubblewrap here by running a trivial sandbox', async () => {
    const status = await detectSandbox();
    expect(status).toMatchObject({ available: true, backend: 'bubblewrap' });
    if (status.available) expect(status.version).toMatch(/^bubblewrap /);
  });

  it('reports no-bubblewrap when bwrap is not on the search path, and assertSandbox refuses', async () => {
    const status = await detectSandbox({ searchPath: '/nonexistent' });
    expect(status).toMatchObject({ available: false, reason: 'no-bubblewrap' });
    const error = await assertSandbox({ searchPath: '/nonexistent' }).catch((e: unknown) => e);
    expect(IsolationUnavailableError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ code: 'ISOLATION_UNAVAILABLE', reason: 'no-bubblewrap' });
    expect((error as Error).message).toMatch(/bubblewrap \(bwrap\) was not found/);
  });

  it('reports namespaces-refused when bwrap exists but cannot build its sandbox', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kw-fake-bwrap-'));
    try {
      // Stands in for a bwrap in a container that forbids user namespaces.
      writeFileSync(
        join(dir, 'bwrap'),
        '#!/bin/sh\necho "bwrap: No permissions to create new namespace" >&2\nexit 1\n',
      );
      chmodSync(join(dir, 'bwrap'), 0o755);
      const status = await detectSandbox({ searchPath: dir });
      expect(status).toMatchObject({ available: false, reason: 'namespaces-refused' });
      if (!status.available) expect(status.message).toMatch(/No permissions to create new namespace/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
