import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { processesMentioning, testGateway } from './index.js';

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, '..', '..', '..');

describe('the test run teardown', () => {
  it('makes a whole vitest run fail when one of its tests leaves a kernel behind, and kills the kernel', () => {
    const base = mkdtempSync(join(testGateway().root, 'nested-run-'));
    const run = spawnSync(
      process.execPath,
      [
        join(repo, 'node_modules/vitest/vitest.mjs'),
        'run',
        '--config',
        join(here, '../fixtures/vitest.fixture.config.ts'),
      ],
      {
        cwd: repo,
        encoding: 'utf8',
        env: { ...process.env, KERNELWARDEN_TEST_TMP: base, KW_FIXTURE: 'fixtures/leaves-a-kernel.fixture.ts' },
        timeout: 120_000,
      },
    );
    const output = `${run.stdout}\n${run.stderr}`;
    expect(output).toContain('1 passed');
    expect(output).toContain('Leak check failed');
    expect(output).toMatch(/kernel [0-9a-f-]+ \(python3\) is still listed by the gateway/);
    expect(run.status).not.toBe(0);
    expect(processesMentioning(base)).toEqual([]);
  });
});
