import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliDirs, type Ran, runCli } from './cli-binary.test-fixture.js';

// A PATH with an empty or relative entry (`PATH=:$PATH`, a `$EXTRA:$PATH` with EXTRA unset) names the current
// directory. A sandboxed kernel starts in its workspace, so such an entry must not reach its launch: what a kernel
// left in its workspace would run as the next kernel's interpreter.

let stateDir: string;
let workDir: string;

const cli = (args: string[]): Promise<Ran> =>
  runCli(args, { stateDir, cwd: workDir, timeoutMs: 120_000, env: { PATH: `:.:bin:${process.env.PATH}` } });

beforeAll(() => {
  ({ stateDir, workDir } = cliDirs('cli-launch-path'));
});

afterAll(async () => {
  const stopped = await runCli(['gateway', 'stop'], { stateDir, cwd: workDir });
  expect(stopped.code, stopped.stderr).toBe(0);
});

describe('a PATH naming the working directory', () => {
  it("runs nothing of the workspace in the sandbox's probe or at a contained kernel's launch, Python or R", async () => {
    const marker = join(workDir, 'planted-ran');
    // Stand-ins for what a launch runs by name (R and the tools its start script calls), each recording that it ran.
    for (const name of ['R', 'python3', 'sh', 'uname', 'sed', 'rm', 'cat', 'dirname', 'basename', 'readlink', 'env']) {
      const file = join(workDir, name);
      writeFileSync(file, `#!/bin/sh\necho "${name}" >> ${JSON.stringify(marker)}\nexec /usr/bin/${name} "$@"\n`);
      chmodSync(file, 0o755);
    }
    // The kernel's own PATH (set once it runs) is the user's business: here a clean one, so only what runs before the
    // first cell — the sandbox's probe and the launch, which get this command's PATH — is under test.
    const own = ['--env', `PATH=${process.env.PATH}`];
    const r = await cli(['run', '--no-network', ...own, '--lang', 'r', '-c', 'cat(getwd(), "\\n")']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`${workDir} \n`);
    const py = await cli(['run', '--no-network', ...own, '-c', 'import os; print(os.getcwd())']);
    expect(py.code, py.stderr).toBe(0);
    expect(py.stdout).toBe(`${workDir}\n`);
    expect(existsSync(marker) ? readFileSync(marker, 'utf8') : 'nothing ran').toBe('nothing ran');
  });

  it("runs nothing of the workspace when a plain or limits-only R kernel exits (R's rm of its temporary directory)", async () => {
    const { stateDir: state, workDir: work } = cliDirs('cli-exit-path');
    const marker = join(work, '..', `${work.split('/').pop()}-planted-ran`);
    for (const name of ['rm', 'sh', 'sed', 'uname', 'cat']) {
      const file = join(work, name);
      writeFileSync(file, `#!/bin/sh\necho "${name}" >> ${JSON.stringify(marker)}\nexec /usr/bin/${name} "$@"\n`);
      chmodSync(file, 0o755);
    }
    const run = (args: string[]) =>
      runCli(args, { stateDir: state, cwd: work, timeoutMs: 120_000, env: { PATH: `:.:${process.env.PATH}` } });
    try {
      const plain = await run(['run', '--lang', 'r', '-c', 'cat(1, "\\n")']);
      expect(plain.code, plain.stderr).toBe(0);
      expect(plain.stdout).toBe('1 \n');
      const limited = await run(['run', '--memory', '1G', '--lang', 'r', '-c', 'cat(Sys.getenv("PATH"), "\\n")']);
      expect(limited.code, limited.stderr).toBe(0);
      expect(limited.stdout.split(':').every((dir) => dir.startsWith('/'))).toBe(true);
    } finally {
      // The kernels are gone (and R has cleaned up after itself) once the gateway has stopped.
      const stopped = await runCli(['gateway', 'stop'], { stateDir: state, cwd: work });
      expect(stopped.code, stopped.stderr).toBe(0);
    }
    expect(existsSync(marker) ? readFileSync(marker, 'utf8') : 'nothing ran').toBe('nothing ran');
  });

  it('runs nothing of the current directory in doctor, which looks programs up through absolute entries only', async () => {
    const { stateDir: state, workDir: work } = cliDirs('cli-doctor-path');
    const marker = join(work, '..', `${work.split('/').pop()}-planted-ran`);
    for (const name of ['sh', 'bwrap', 'R', 'jupyter-server', 'python3', 'uname', 'stat']) {
      const file = join(work, name);
      writeFileSync(file, `#!/bin/sh\necho "${name}" >> ${JSON.stringify(marker)}\nexit 0\n`);
      chmodSync(file, 0o755);
    }
    const doctor = await runCli(['doctor', '--json'], {
      stateDir: state,
      cwd: work,
      timeoutMs: 120_000,
      env: { PATH: `:.:bin:${process.env.PATH}` },
    });
    // Everything doctor checks is found where it is on this machine (the test environment has all of it).
    expect(doctor.stdout, doctor.stderr).toContain('"jupyter-server"');
    expect(doctor.stdout).not.toContain(work);
    expect(existsSync(marker) ? readFileSync(marker, 'utf8') : 'nothing ran').toBe('nothing ran');
  });
});
