import { spawnSync } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliDirs, type Ran, runCli } from './cli-binary.test-fixture.js';

// The interpreter the Python kernels run: --python, VIRTUAL_ENV, a .venv; and PYTHONPATH reaching them.

/** A virtual environment with ipykernel: the one the jupyter_server 2 / ipykernel 7 test stack runs from. */
const VENV = '/work/main/.cache/jupyter-venv';
const VENV_PYTHON = join(VENV, 'bin', 'python');

let stateDir: string;
let workDir: string;

const cli = (args: string[], opts: { env?: Record<string, string>; cwd?: string } = {}): Promise<Ran> =>
  runCli(args, { stateDir, cwd: opts.cwd ?? workDir, ...(opts.env ? { env: opts.env } : {}) });

const WHO = 'import sys, ipykernel; print(sys.executable); print(ipykernel.__version__)';

beforeAll(() => {
  ({ stateDir, workDir } = cliDirs('cli-python'));
});

afterAll(async () => {
  const stopped = await cli(['gateway', 'stop']);
  expect(stopped.code, stopped.stderr).toBe(0);
});

describe('the Python interpreter of the kernels', () => {
  it('is --python PATH when given', async () => {
    const ran = await cli(['run', '--python', VENV_PYTHON, '-c', WHO]);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout.split('\n')[0]).toBe(VENV_PYTHON);
  });

  it("is VIRTUAL_ENV's without a flag, and doctor says so", async () => {
    const ran = await cli(['run', '-c', 'import sys; print(sys.prefix)'], { env: { VIRTUAL_ENV: VENV } });
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toBe(`${VENV}\n`);
    const doctor = await cli(['doctor', '--json'], { env: { VIRTUAL_ENV: VENV } });
    const check = JSON.parse(doctor.stdout).checks.find((c: { name: string }) => c.name === 'python kernel');
    expect(check).toMatchObject({ ok: true });
    expect(check.detail).toMatch(
      new RegExp(`^${VENV_PYTHON} \\(Python 3\\.\\d+\\.\\d+, ipykernel \\d+\\.\\d+\\.\\d+\\), from VIRTUAL_ENV$`),
    );
  });

  it('is the .venv of the working directory or the nearest directory above', async () => {
    const project = join(workDir, 'project');
    mkdirSync(join(project, 'src', 'deep'), { recursive: true });
    symlinkSync(VENV, join(project, '.venv'));
    const ran = await cli(['run', '-c', 'import sys; print(sys.executable)'], { cwd: join(project, 'src', 'deep') });
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toBe(`${join(project, '.venv', 'bin', 'python')}\n`);
  });

  it('runs sandboxed under --hide, the chosen interpreter too', async () => {
    const secret = join(workDir, 'hidden');
    mkdirSync(secret, { recursive: true });
    writeFileSync(join(secret, 'key'), 'k');
    // The command's system temporary directory: one of its own (/tmp holds the test's directories).
    const systmp = join(workDir, 'systmp');
    mkdirSync(systmp, { recursive: true });
    const code = `import sys\nprint(sys.executable)\nopen(${JSON.stringify(join(secret, 'key'))})`;
    const ran = await cli(['run', '--python', VENV_PYTHON, '--hide', secret, '-c', code], { env: { TMPDIR: systmp } });
    expect(ran.code, ran.stderr).toBe(1);
    expect(ran.stdout).toBe(`${VENV_PYTHON}\n`);
    expect(ran.stderr).toMatch(/(FileNotFoundError|PermissionError)/);
  });

  it('is refused at once, with the command that installs ipykernel, when it has none', async () => {
    const bare = join(workDir, 'bare-venv');
    const made = spawnSync('/usr/bin/python3', ['-m', 'venv', '--without-pip', bare], { encoding: 'utf8' });
    expect(made.status, made.stderr).toBe(0);
    const ran = await cli(['run', '-c', 'print(1)'], { env: { VIRTUAL_ENV: bare } });
    expect(ran.code).toBe(2);
    expect(ran.stdout).toBe('');
    expect(ran.stderr).toBe(
      `kernelwarden: the kernel's Python interpreter ${bare}/bin/python (the active virtual environment, VIRTUAL_ENV) ` +
        `has no ipykernel, which runs the kernel: install it with\n  ${bare}/bin/python -m pip install ipykernel\n`,
    );
    // Under --hide it is not run outside the sandbox: its files tell.
    const secret = join(workDir, 'hidden-for-bare');
    mkdirSync(secret, { recursive: true });
    const hidden = await cli(['run', '--hide', secret, '-c', 'print(1)'], {
      env: { VIRTUAL_ENV: bare, TMPDIR: join(workDir, 'systmp') },
    });
    expect(hidden.code).toBe(2);
    expect(hidden.stderr).toMatch(/has no ipykernel, which runs the kernel: install it with\n/);
    const flag = await cli(['run', '--python', join(workDir, 'no-such-python'), '-c', 'print(1)']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toMatch(/--python .*no-such-python does not exist/);
  });
});

describe('PYTHONPATH given to the command', () => {
  it('reaches the kernel (a pooled kernel included)', async () => {
    const lib = join(workDir, 'lib');
    mkdirSync(lib, { recursive: true });
    writeFileSync(join(lib, 'kw_pythonpath_mod.py'), 'ANSWER = 42\n');
    const ran = await cli(['run', '-c', 'import kw_pythonpath_mod, sys\nprint(kw_pythonpath_mod.ANSWER)'], {
      env: { PYTHONPATH: lib },
    });
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toBe('42\n');
  });

  it('is refused with the reason where the kernel would not get it (--hide)', async () => {
    const secret = join(workDir, 'secret');
    mkdirSync(secret, { recursive: true });
    const ran = await cli(['run', '--hide', secret, '-c', 'print(1)'], { env: { PYTHONPATH: join(workDir, 'lib') } });
    expect(ran.code).toBe(2);
    expect(ran.stderr).toBe(
      'kernelwarden: PYTHONPATH is set here, but a kernel under --hide gets only --env variables: pass --env ' +
        'PYTHONPATH=… to give it to the kernel, or unset it\n',
    );
  });
});
