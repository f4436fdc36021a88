import { spawnSync } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { processesMentioning } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliDirs, type Ran, runCli } from './cli-binary.test-fixture.js';
import { interpreterSpecName } from './python-interpreter.js';

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

async function waitUntil(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 200));
  }
  return true;
}

describe('the chosen interpreter with the warm pool on', () => {
  it('is pooled per interpreter, and per policy and interpreter under --hide: the next run with the same ones claims a started kernel', async () => {
    // A gateway of its own, started with the pool on.
    const dirs = cliDirs('cli-python-pool');
    const env = { KERNELWARDEN_POOL: '1' };
    const pooledCli = (args: string[]) => runCli(args, { stateDir: dirs.stateDir, cwd: dirs.workDir, env });
    const spec = interpreterSpecName(VENV_PYTHON);
    const status = async () => {
      const ran = await pooledCli(['gateway', 'status', '--json']);
      expect(ran.code, ran.stderr).toBe(0);
      return JSON.parse(ran.stdout) as {
        kernels: { id: string; name: string; pooled?: boolean; interpreter?: string }[];
        pool: Record<string, { wanted: number; ready: number }>;
      };
    };
    /** The ready pooled kernels of the interpreter's kernelspec, once there is one. */
    const pooledOfSpec = async () => {
      let found: { id: string; name: string; interpreter?: string }[] = [];
      const ready = await waitUntil(async () => {
        found = (await status()).kernels.filter((k) => k.pooled && k.name === spec);
        return found.length > 0;
      }, 60_000);
      expect(ready, `no pooled ${spec} kernel: ${JSON.stringify(await status())}`).toBe(true);
      return found;
    };
    // The kernel's id, from the connection file jupyter-server named after it.
    const code = [
      'import sys',
      'from ipykernel.kernelapp import IPKernelApp',
      'print(sys.executable)',
      'print(IPKernelApp.instance().connection_file)',
    ].join('\n');
    try {
      const first = await pooledCli(['run', '--python', VENV_PYTHON, '-c', code]);
      expect(first.code, first.stderr).toBe(0);
      expect(first.stdout.split('\n')[0]).toBe(VENV_PYTHON);

      // The pool keeps one started kernel of that interpreter's kernelspec, as many as of python3.
      const [ready] = await pooledOfSpec();
      expect(ready?.interpreter).toBe(VENV_PYTHON);
      expect((await status()).pool[spec]).toEqual({ wanted: 1, ready: 1 });

      // The next run with the same interpreter claims that kernel: it runs there, and it is gone from the pool.
      const second = await pooledCli(['run', '--python', VENV_PYTHON, '-c', code]);
      expect(second.code, second.stderr).toBe(0);
      const [executable, connectionFile] = second.stdout.trim().split('\n');
      expect(executable).toBe(VENV_PYTHON);
      expect(basename(connectionFile ?? '')).toBe(`kernel-${ready?.id}.json`);
      expect((await status()).kernels.map((k) => k.id)).not.toContain(ready?.id);
      // The pool starts the next one in the background.
      const [next] = await pooledOfSpec();
      expect(next?.id).not.toBe(ready?.id);

      // Under --hide, the isolated copy of the interpreter's kernelspec is pooled per policy and interpreter.
      const secret = join(dirs.workDir, 'hidden');
      const systmp = join(dirs.workDir, 'systmp');
      mkdirSync(secret, { recursive: true });
      mkdirSync(systmp, { recursive: true });
      const hidden = () =>
        runCli(['run', '--python', VENV_PYTHON, '--hide', secret, '-c', code], {
          stateDir: dirs.stateDir,
          cwd: dirs.workDir,
          env: { ...env, TMPDIR: systmp },
        });
      const third = await hidden();
      expect(third.code, third.stderr).toBe(0);
      let isolated: { id: string; name: string }[] = [];
      expect(
        await waitUntil(async () => {
          isolated = (await status()).kernels.filter((k) => k.pooled && k.name.startsWith('kw-iso-'));
          return isolated.length > 0;
        }, 60_000),
        JSON.stringify(await status()),
      ).toBe(true);
      const fourth = await hidden();
      expect(fourth.code, fourth.stderr).toBe(0);
      const [hiddenExecutable, hiddenConnection] = fourth.stdout.trim().split('\n');
      expect(hiddenExecutable).toBe(VENV_PYTHON);
      expect(basename(hiddenConnection ?? '')).toBe(`kernel-${isolated[0]?.id}.json`);
    } finally {
      const stopped = await pooledCli(['gateway', 'stop']);
      expect(stopped.code, stopped.stderr).toBe(0);
    }
    // With the server gone, nothing of its pool runs.
    expect(await waitUntil(() => processesMentioning(dirs.stateDir).length === 0, 15_000)).toBe(true);
  });
});
