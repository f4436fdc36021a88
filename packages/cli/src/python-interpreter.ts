import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { KernelwardenError } from '@kernelwarden/core';
import { containingWorkspace } from './contained-workspaces.js';

/** Where the Python interpreter of the kernels comes from. */
export type PythonSource = '--python' | 'VIRTUAL_ENV' | '.venv';

/** The interpreter the user means, and why. */
export interface PythonChoice {
  /** The interpreter's path, absolute, as given (a virtual environment's `bin/python` is not resolved). */
  path: string;
  source: PythonSource;
}

/** What an interpreter said about itself. */
export interface InterpreterFacts {
  path: string;
  /** `3.11.2`; empty when the interpreter was not run (sandboxed kernels: see `checkInterpreter`). */
  version: string;
  /** `6.17.0`; undefined when ipykernel cannot be imported, or the interpreter was not run. */
  ipykernel: string | undefined;
}

/**
 * The interpreter cannot run a kernel: it does not exist, does not run, or has no ipykernel. The message gives the
 * exact command that installs ipykernel. The CLI exits 2.
 */
export class PythonInterpreterError extends KernelwardenError {
  static override readonly brand: string = 'PythonInterpreterError';
  readonly interpreter: string;

  constructor(message: string, interpreter: string) {
    super(message, { code: 'PYTHON_INTERPRETER' });
    this.interpreter = interpreter;
  }
}

/**
 * Whether a `.venv` found above the working directory is this user's to run: the directory, its `bin` and its
 * `bin/python` (the link itself, when it is one) belong to this user or root, and no other user can write the
 * directories or the file. A `.venv` another user put in a shared directory (`/tmp/.venv`, above every project under
 * `/tmp`) would otherwise run their program as this user.
 */
function ownVenv(venv: string): boolean {
  const uid = process.getuid?.();
  if (uid === undefined) return true;
  for (const path of [venv, join(venv, 'bin'), venvPython(venv)]) {
    let st: ReturnType<typeof lstatSync>;
    try {
      st = lstatSync(path);
    } catch {
      return false;
    }
    if (st.uid !== uid && st.uid !== 0) return false;
    if (!st.isSymbolicLink() && (st.mode & 0o022) !== 0) return false;
  }
  return true;
}

/** The interpreter of a virtual environment directory. */
function venvPython(dir: string): string {
  return join(dir, 'bin', 'python');
}

/**
 * The flag that opts in to `venv`, a `.venv` passed over for lying in a contained kernel's workspace: `--python` with
 * its interpreter's path relative to `cwd` (against which `--python` resolves), `--python .venv/bin/python` for the
 * `.venv` of `cwd` itself; quoted for a shell when the path needs it.
 */
export function pythonOptIn(venv: string, cwd: string): string {
  const path = relative(resolve(cwd), venvPython(venv)) || venvPython(venv);
  return `--python ${/^[\w@%+=:,./-]+$/.test(path) ? path : `'${path.replaceAll("'", "'\\''")}'`}`;
}

/**
 * What a command says of `venv`, a `.venv` passed over for lying in `workspace`, a contained kernel's: why, what runs
 * instead, and how to opt in to it.
 */
export function passedOverNotice(venv: string, workspace: string, cwd: string): string {
  return (
    `not using ${venv}: it lies in ${workspace}, the workspace of a contained kernel (--hide or a limit), which ` +
    "could have written it, so it is no longer picked automatically; the Python kernel runs the gateway's python3 " +
    `kernelspec. To opt in to it, pass ${pythonOptIn(venv, cwd)} (or activate it: VIRTUAL_ENV=${venv})`
  );
}

/**
 * The interpreter the kernels should run, in this order: `--python PATH`; the active virtual environment
 * (`VIRTUAL_ENV`); a `.venv` directory in `cwd` or the nearest directory above it that has one of this user's (or
 * root's) that no other user can write (`ownVenv`; another's is passed over). Undefined: the
 * gateway's own `python3` kernelspec.
 *
 * A `.venv` that lies in one of `untrusted` (canonical directories: the workspaces contained kernels were given,
 * which they could write) is never chosen automatically: the gateway's own interpreter runs, and `onPassedOver`
 * says which `.venv` and why. `--python` and `VIRTUAL_ENV` are the user's explicit choice and are honoured.
 */
export function choosePython(opts: {
  flag: string | undefined;
  env: Record<string, string | undefined>;
  cwd: string;
  untrusted?: readonly string[];
  onPassedOver?: (venv: string, workspace: string) => void;
}): PythonChoice | undefined {
  if (opts.flag !== undefined) return { path: resolve(opts.cwd, opts.flag), source: '--python' };
  const active = opts.env.VIRTUAL_ENV;
  if (active) return { path: venvPython(resolve(opts.cwd, active)), source: 'VIRTUAL_ENV' };
  let dir = resolve(opts.cwd);
  for (;;) {
    const venv = join(dir, '.venv');
    const candidate = venvPython(venv);
    if (existsSync(candidate) && ownVenv(venv)) {
      const workspace = untrustedWorkspace(venv, opts.untrusted ?? []);
      if (workspace !== undefined) {
        opts.onPassedOver?.(venv, workspace);
        return undefined;
      }
      return { path: candidate, source: '.venv' };
    }
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

/**
 * The untrusted workspace `venv` lies in: its directory, or what it (or its interpreter) resolves to, is at or below
 * one of `workspaces`. A path that cannot be resolved counts as untrusted when there are any.
 */
function untrustedWorkspace(venv: string, workspaces: readonly string[]): string | undefined {
  if (workspaces.length === 0) return undefined;
  const paths: string[] = [];
  for (const path of [dirname(venv), venv, venvPython(venv)]) {
    try {
      paths.push(realpathSync.native(path));
    } catch {
      return workspaces[0];
    }
  }
  for (const path of paths) {
    const workspace = containingWorkspace(path, workspaces);
    if (workspace !== undefined) return workspace;
  }
  return undefined;
}

/** How `choice` is named in messages: `--python /x/bin/python`, `/p/.venv/bin/python (the nearest .venv, in /p)`. */
export function describeChoice(choice: PythonChoice): string {
  if (choice.source === '--python') return `--python ${choice.path}`;
  if (choice.source === 'VIRTUAL_ENV') return `${choice.path} (the active virtual environment, VIRTUAL_ENV)`;
  return `${choice.path} (the nearest .venv, in ${dirname(dirname(dirname(choice.path)))})`;
}

/** Asks an interpreter its version and ipykernel's, without importing ipykernel (slow): its metadata says. */
export const INTERPRETER_PROBE = [
  'import sys, importlib.util',
  'print(sys.version.split()[0])',
  'version = ""',
  'if importlib.util.find_spec("ipykernel") is not None:',
  '    try:',
  '        import importlib.metadata as m',
  '        version = m.version("ipykernel")',
  '    except Exception:',
  '        version = "unknown version"',
  'print(version)',
].join('\n');

/** Runs `path` once to learn its version and ipykernel's; undefined when it does not run. */
export function probeInterpreter(path: string, timeoutMs = 20_000): InterpreterFacts | undefined {
  const ran = spawnSync(path, ['-c', INTERPRETER_PROBE], { encoding: 'utf8', timeout: timeoutMs });
  if (ran.status !== 0 || typeof ran.stdout !== 'string') return undefined;
  return parseProbe(path, ran.stdout);
}

/** The facts in `INTERPRETER_PROBE`'s output. */
export function parseProbe(path: string, stdout: string): InterpreterFacts {
  const [version = '', ipykernel = ''] = stdout.split('\n');
  return { path, version: version.trim(), ipykernel: ipykernel.trim() || undefined };
}

/**
 * Whether the virtual environment `interpreter` belongs to has ipykernel, told from its files without running it:
 * true or false for a virtual environment that sees only its own packages, undefined when the files cannot tell
 * (not a virtual environment, or one that also sees the system's packages).
 */
export function venvHasIpykernel(interpreter: string): boolean | undefined {
  const prefix = dirname(dirname(interpreter));
  let config: string;
  try {
    config = readFileSync(join(prefix, 'pyvenv.cfg'), 'utf8');
  } catch {
    return undefined;
  }
  if (/^\s*include-system-site-packages\s*=\s*true\s*$/im.test(config)) return undefined;
  try {
    for (const lib of ['lib', 'lib64']) {
      const dir = join(prefix, lib);
      if (!existsSync(dir)) continue;
      for (const version of readdirSync(dir)) {
        if (existsSync(join(dir, version, 'site-packages', 'ipykernel', '__init__.py'))) return true;
      }
    }
  } catch {
    return undefined;
  }
  return false;
}

/**
 * Checks that `choice` can run a kernel, at once, before any gateway or kernel starts; throws
 * `PythonInterpreterError` with the command that fixes it.
 *
 * By default (the kernels run unsandboxed, as this process does) the interpreter is run once to ask it (`probe`).
 * With `run: false` (`--hide` or a limit: the kernels run in a sandbox) it is never run outside the sandbox — a `.venv` in an
 * untrusted checkout may hold any program — and only its virtual environment's files are looked at.
 */
export function checkInterpreter(
  choice: PythonChoice,
  opts: { run?: boolean; probe?: (path: string) => InterpreterFacts | undefined } = {},
): InterpreterFacts {
  const probe = opts.probe ?? probeInterpreter;
  if (!existsSync(choice.path)) {
    throw new PythonInterpreterError(
      `the kernel's Python interpreter ${describeChoice(choice)} does not exist` +
        (choice.source === '--python' ? '' : ': create the environment, or pass --python PATH'),
      choice.path,
    );
  }
  if (opts.run === false) {
    if (venvHasIpykernel(choice.path) === false) throw noIpykernel(choice);
    return { path: choice.path, version: '', ipykernel: undefined };
  }
  const facts = probe(choice.path);
  if (!facts) {
    throw new PythonInterpreterError(
      `the kernel's Python interpreter ${describeChoice(choice)} does not run`,
      choice.path,
    );
  }
  if (!facts.ipykernel) throw noIpykernel(choice);
  return facts;
}

function noIpykernel(choice: PythonChoice): PythonInterpreterError {
  return new PythonInterpreterError(
    `the kernel's Python interpreter ${describeChoice(choice)} has no ipykernel, which runs the kernel: ` +
      `install it with\n  ${shellQuote(choice.path)} -m pip install ipykernel`,
    choice.path,
  );
}

function shellQuote(text: string): string {
  return /^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replaceAll("'", "'\\''")}'`;
}

/** The name of the kernelspec that runs `interpreter`: `kw-py-` and 16 hex digits of its path. */
export function interpreterSpecName(interpreter: string): string {
  return `kw-py-${createHash('sha256').update(interpreter).digest('hex').slice(0, 16)}`;
}

/** The kernelspec of `interpreter` (ipykernel's own launch line). */
export function interpreterSpec(interpreter: string): {
  argv: string[];
  display_name: string;
  language: string;
} {
  return {
    argv: [interpreter, '-m', 'ipykernel_launcher', '-f', '{connection_file}'],
    display_name: `Python (${interpreter})`,
    language: 'python',
  };
}

/**
 * Writes the kernelspec of `interpreter` into `kernelSpecDir` (the embedded gateway's), where the server finds it;
 * the same interpreter always gets the same spec. Returns its name.
 */
export function installInterpreterSpec(kernelSpecDir: string, interpreter: string): string {
  const name = interpreterSpecName(interpreter);
  const dir = join(kernelSpecDir, name);
  mkdirSync(dir, { recursive: true });
  // Written whole, then renamed: a server listing kernelspecs meanwhile never reads half a file.
  const temp = join(dir, `.kernel.json.${process.pid}.${randomBytes(4).toString('hex')}`);
  writeFileSync(temp, `${JSON.stringify(interpreterSpec(interpreter), null, 2)}\n`);
  renameSync(temp, join(dir, 'kernel.json'));
  return name;
}
