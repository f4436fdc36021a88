import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readContainedWorkspaces, recordContainedWorkspace } from './contained-workspaces.js';
import {
  checkInterpreter,
  choosePython,
  interpreterSpecName,
  PythonInterpreterError,
  passedOverNotice,
  pythonOptIn,
} from './python-interpreter.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function project(): string {
  const dir = mkdtempSync(join(tmpdir(), 'kw-python-'));
  dirs.push(dir);
  mkdirSync(join(dir, '.venv', 'bin'), { recursive: true });
  writeFileSync(join(dir, '.venv', 'bin', 'python'), '');
  mkdirSync(join(dir, 'src', 'deep'), { recursive: true });
  return dir;
}

describe('choosePython', () => {
  it('takes --python, then VIRTUAL_ENV, then the nearest .venv, else none', () => {
    const dir = project();
    const deep = join(dir, 'src', 'deep');
    expect(choosePython({ flag: 'py', env: { VIRTUAL_ENV: '/v' }, cwd: deep })).toEqual({
      path: join(deep, 'py'),
      source: '--python',
    });
    expect(choosePython({ flag: undefined, env: { VIRTUAL_ENV: '/v' }, cwd: deep })).toEqual({
      path: '/v/bin/python',
      source: 'VIRTUAL_ENV',
    });
    expect(choosePython({ flag: undefined, env: {}, cwd: deep })).toEqual({
      path: join(dir, '.venv', 'bin', 'python'),
      source: '.venv',
    });
    expect(choosePython({ flag: undefined, env: {}, cwd: '/' })).toBeUndefined();
  });

  it("passes over a .venv in or below a contained kernel's workspace, honouring --python and VIRTUAL_ENV", () => {
    const dir = project();
    const workspace = realpathSync.native(dir);
    const deep = join(dir, 'src', 'deep');
    const passed: string[] = [];
    const onPassedOver = (venv: string, where: string) => passed.push(`${venv} in ${where}`);
    expect(choosePython({ flag: undefined, env: {}, cwd: deep, untrusted: [workspace], onPassedOver })).toBeUndefined();
    expect(passed).toEqual([`${join(dir, '.venv')} in ${workspace}`]);
    // A workspace below the .venv's directory, or a sibling with a common prefix, does not count.
    expect(
      choosePython({ flag: undefined, env: {}, cwd: deep, untrusted: [join(workspace, 'src'), `${workspace}x`] }),
    ).toEqual({
      path: join(dir, '.venv', 'bin', 'python'),
      source: '.venv',
    });
    // A .venv linked from outside into the workspace counts as the workspace's.
    const outside = mkdtempSync(join(tmpdir(), 'kw-python-link-'));
    dirs.push(outside);
    symlinkSync(join(dir, '.venv'), join(outside, '.venv'));
    expect(choosePython({ flag: undefined, env: {}, cwd: outside, untrusted: [workspace] })).toBeUndefined();
    expect(choosePython({ flag: 'py', env: {}, cwd: deep, untrusted: [workspace] })?.source).toBe('--python');
    expect(
      choosePython({ flag: undefined, env: { VIRTUAL_ENV: '/v' }, cwd: deep, untrusted: [workspace] })?.source,
    ).toBe('VIRTUAL_ENV');
  });
});

describe('passedOverNotice', () => {
  it("says why a contained workspace's .venv is passed over and how to opt in to it with --python", () => {
    expect(passedOverNotice('/p/.venv', '/p', '/p')).toBe(
      "not using /p/.venv: it lies in /p, the workspace of a contained kernel (--hide or a limit), which could have written it, so it is no longer picked automatically; the Python kernel runs the gateway's python3 kernelspec. To opt in to it, pass --python .venv/bin/python (or activate it: VIRTUAL_ENV=/p/.venv)",
    );
  });

  it('gives the --python path relative to the directory it resolves against, quoted when a shell needs it', () => {
    expect(pythonOptIn('/p/.venv', '/p')).toBe('--python .venv/bin/python');
    expect(pythonOptIn('/p/.venv', '/p/src/deep')).toBe('--python ../../.venv/bin/python');
    expect(pythonOptIn("/my proj/it's/.venv", "/my proj/it's")).toBe('--python .venv/bin/python');
    expect(pythonOptIn("/my proj/it's/.venv", '/p')).toBe(`--python '../my proj/it'\\''s/.venv/bin/python'`);
    // What the flag names is the interpreter the .venv holds, resolved as --python resolves it.
    const dir = project();
    const deep = join(dir, 'src', 'deep');
    const flag = pythonOptIn(join(dir, '.venv'), deep).slice('--python '.length);
    expect(choosePython({ flag, env: {}, cwd: deep })).toEqual({
      path: join(dir, '.venv', 'bin', 'python'),
      source: '--python',
    });
  });
});

describe('checkInterpreter', () => {
  it('refuses an interpreter without ipykernel with the command that installs it', () => {
    const dir = project();
    const path = join(dir, '.venv', 'bin', 'python');
    let error: unknown;
    try {
      checkInterpreter({ path, source: '.venv' }, { probe: () => ({ path, version: '3.12.1', ipykernel: undefined }) });
    } catch (e) {
      error = e;
    }
    expect(PythonInterpreterError.isInstance(error)).toBe(true);
    expect((error as PythonInterpreterError).code).toBe('PYTHON_INTERPRETER');
    expect((error as Error).message).toBe(
      `the kernel's Python interpreter ${path} (the nearest .venv, in ${dir}) has no ipykernel, which runs the kernel: ` +
        `install it with\n  ${path} -m pip install ipykernel`,
    );
    expect(
      checkInterpreter({ path, source: '.venv' }, { probe: () => ({ path, version: '3.12.1', ipykernel: '7.4.0' }) })
        .ipykernel,
    ).toBe('7.4.0');
  });

  it('never runs the interpreter for sandboxed kernels: a virtual environment is judged by its files', () => {
    const dir = project();
    const path = join(dir, '.venv', 'bin', 'python');
    writeFileSync(join(dir, '.venv', 'pyvenv.cfg'), 'include-system-site-packages = false\n');
    mkdirSync(join(dir, '.venv', 'lib', 'python3.12', 'site-packages'), { recursive: true });
    expect(() => checkInterpreter({ path, source: '.venv' }, { run: false })).toThrow(/has no ipykernel/);
    mkdirSync(join(dir, '.venv', 'lib', 'python3.12', 'site-packages', 'ipykernel'));
    writeFileSync(join(dir, '.venv', 'lib', 'python3.12', 'site-packages', 'ipykernel', '__init__.py'), '');
    expect(checkInterpreter({ path, source: '.venv' }, { run: false })).toEqual({
      path,
      version: '',
      ipykernel: undefined,
    });
    writeFileSync(join(dir, '.venv', 'pyvenv.cfg'), 'include-system-site-packages = true\n');
    rmSync(join(dir, '.venv', 'lib'), { recursive: true });
    expect(checkInterpreter({ path, source: '.venv' }, { run: false }).path).toBe(path);
  });

  it('names one spec per interpreter', () => {
    expect(interpreterSpecName('/a/bin/python')).toMatch(/^kw-py-[0-9a-f]{16}$/);
    expect(interpreterSpecName('/a/bin/python')).not.toBe(interpreterSpecName('/b/bin/python'));
  });
});

describe('the record of contained workspaces', () => {
  it('holds each canonical workspace once, 0600 in a 0700 directory', () => {
    const state = mkdtempSync(join(tmpdir(), 'kw-record-'));
    dirs.push(state);
    const file = join(state, 'cli', 'contained-workspaces');
    expect(readContainedWorkspaces(file)).toEqual([]);
    const work = project();
    recordContainedWorkspace(file, join(work, 'src', '..'));
    recordContainedWorkspace(file, work);
    expect(readContainedWorkspaces(file)).toEqual([realpathSync.native(work)]);
    expect(readFileSync(file, 'utf8').split('\n').length).toBe(2);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(state, 'cli')).mode & 0o777).toBe(0o700);
  });
});
