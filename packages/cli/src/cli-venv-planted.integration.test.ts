import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliDirs, type Ran, runCli } from './cli-binary.test-fixture.js';

// A contained kernel writes its workspace. What it writes there must not run outside its sandbox when the next
// kernel launches in that directory — also not as the interpreter the CLI picks for the next run.

let stateDir: string;
let workDir: string;

const cli = (args: string[]): Promise<Ran> => runCli(args, { stateDir, cwd: workDir, timeoutMs: 120_000 });

beforeAll(() => {
  ({ stateDir, workDir } = cliDirs('cli-venv-planted'));
});

afterAll(async () => {
  const stopped = await runCli(['gateway', 'stop'], { stateDir, cwd: workDir });
  expect(stopped.code, stopped.stderr).toBe(0);
});

describe('a .venv a contained kernel left in its workspace', () => {
  it('does not run outside the sandbox when the next plain kernel starts there', async () => {
    const marker = join(workDir, '..', `${workDir.split('/').pop()}-planted-ran`);
    const plant = `
import os
os.makedirs(".venv/bin", exist_ok=True)
open(".venv/pyvenv.cfg", "w").write("home = /usr/bin\\ninclude-system-site-packages = true\\n")
open(".venv/bin/python", "w").write("#!/bin/sh\\necho ran >> ${marker}\\nexec /usr/bin/python3 \\"$@\\"\\n")
os.chmod(".venv/bin/python", 0o755)
print("planted")
`;
    const contained = await cli(['run', '--no-network', '-c', plant]);
    expect(contained.code, contained.stderr).toBe(0);
    expect(contained.stdout).toBe('planted\n');
    const plain = await cli(['run', '-c', 'print(1)']);
    expect(plain.stdout).toBe('1\n');
    expect(existsSync(marker) ? readFileSync(marker, 'utf8') : 'nothing ran').toBe('nothing ran');
    // The user is told which .venv was passed over, why, and how to choose it.
    expect(plain.stderr).toContain(`kernelwarden: not using ${join(workDir, '.venv')}: it lies in `);
    expect(plain.stderr).toContain('so it is no longer picked automatically');
    expect(plain.stderr).toContain('To opt in to it, pass --python .venv/bin/python (or activate it: VIRTUAL_ENV=');
    // Opting in as told: the .venv's interpreter runs (inside no sandbox: the user chose it).
    const optedIn = await cli(['run', '--python', '.venv/bin/python', '-c', 'print(2)']);
    expect(optedIn.code, optedIn.stderr).toBe(0);
    expect(optedIn.stdout).toBe('2\n');
    expect(optedIn.stderr).not.toContain('not using');
    expect(existsSync(marker) ? readFileSync(marker, 'utf8') : 'nothing ran').toMatch(/^ran\n/);
    rmSync(marker, { force: true });
    const doctor = await cli(['doctor', '--json']);
    expect(doctor.stdout).toContain('is not used: it lies in');
    expect(existsSync(marker) ? readFileSync(marker, 'utf8') : 'nothing ran').toBe('nothing ran');
  });
});
