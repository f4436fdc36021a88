import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const here = fileURLToPath(new URL('.', import.meta.url));
const dist = join(here, '..', 'dist');

/** Runs the broken-kernel fixture in a child vitest and returns its exit code and JSON report. */
async function runFixture(): Promise<{ code: number | null; report: any }> {
  const out = await mkdtemp(join(tmpdir(), 'testkit-conformance-'));
  try {
    const vitestBin = join(createRequire(import.meta.url).resolve('vitest/package.json'), '..', 'vitest.mjs');
    const config = join(here, 'fixtures', 'vitest.fixture.config.ts');
    const report = join(out, 'report.json');
    const child = spawn(
      process.execPath,
      [vitestBin, 'run', '--config', config, '--reporter=json', `--outputFile=${report}`],
      { cwd: join(here, 'fixtures'), stdio: 'ignore', env: { ...process.env, CI: '1' } },
    );
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    return { code, report: JSON.parse(await readFile(report, 'utf8')) };
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}

describe('describeKernelHandle', () => {
  it('fails for a deliberately broken kernel: the suite can fail', { timeout: 180_000 }, async () => {
    const { code, report } = await runFixture();
    expect(code).not.toBe(0);
    const tests = report.testResults.flatMap((file: any) => file.assertionResults) as {
      title: string;
      status: string;
    }[];
    const failed = tests.filter((t) => t.status === 'failed').map((t) => t.title);
    expect(failed).toEqual(
      expect.arrayContaining([
        'returns the cell id it was given, and a fresh one when none was given',
        'settles at once with cancelled (not timedOut) when the signal aborts',
        'marks cancelled and timedOut when timeoutMs runs out',
        'restart clears interpreter state and keeps the same, alive handle',
        'shutdown is confirmed, makes isAlive false at once, and is idempotent',
      ]),
    );
    // What the broken kernel does right still passes: the failures are the contract breaches, not noise.
    expect(tests.find((t) => t.title.startsWith('executes a cell'))?.status).toBe('passed');
  });
});

describe('package entry points', () => {
  it('the main entry (dist/index.js) imports no test runner', async () => {
    const main = await readFile(join(dist, 'index.js'), 'utf8');
    expect(main).not.toMatch(/from\s*['"]vitest|import\(\s*['"]vitest|require\(\s*['"]vitest|import\s*['"]vitest/);
    const glue = await readFile(join(dist, 'vitest.js'), 'utf8');
    expect(glue).toMatch(/from\s*['"]vitest['"]/);
  });
});
