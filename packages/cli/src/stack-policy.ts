import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import type { IsolationPolicy, KernelLimits, LimitName } from '@kernelwarden/isolation';
import type { StackOptions } from './command-types.js';
import { containedWorkspacesPath, readContainedWorkspaces, recordContainedWorkspace } from './contained-workspaces.js';
import { isolation } from './isolation.js';
import { LIMIT_FLAG_NAMES } from './limit-flags.js';
import { absolutePathEntries } from './path-entries.js';
import {
  checkInterpreter,
  choosePython,
  type InterpreterFacts,
  type PythonSource,
  passedOverNotice,
} from './python-interpreter.js';
import { UsageError } from './usage-error.js';

// What a stack's kernels run with, decided before any gateway or kernel starts: the policy (`--hide`, the limits),
// the interpreter, the environment — and the refusals of what cannot be honoured.

/**
 * Variables never handed to a kernel: a gateway's credentials, and the marker the embedded gateway gives its own
 * kernels' processes (this command may itself run inside a kernel).
 */
const WITHHELD_VARIABLES = [
  'KERNELWARDEN_GATEWAY_TOKEN',
  'JUPYTER_TOKEN',
  'JPY_API_TOKEN',
  'JUPYTERHUB_API_TOKEN',
  'KERNELWARDEN_KERNEL',
];
/** Names a kernel's environment code can set in Python and R alike (exported shell functions are not). */
const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The variables a kernel of this command gets. An unisolated kernel on the embedded gateway: this process's own
 * environment (as if the code ran here), without any gateway credential, then `--env`. An isolated kernel (`--hide`)
 * and a remote gateway's kernel: only `--env` — an isolated kernel runs code that is kept from reading what is
 * hidden, and credentials in the environment would hand it what the policy hides on disk; a remote gateway gets
 * nothing of this machine's environment. A kernel under limits only (no `--hide`) counts as unisolated: limits change
 * what it may use, not what it may see. Either way the kernel also has the embedded server's few inherited
 * variables (PATH, HOME, locale…), never those of whoever started the server. Its `PATH`, wherever it comes from
 * (this process, `--env`), keeps only absolute entries (`absolutePathEntries`).
 */
export function kernelEnvironment(
  options: Pick<StackOptions, 'env' | 'tokenEnv'>,
  where: { embedded: boolean; isolated: boolean },
  own: Record<string, string | undefined>,
): Record<string, string> {
  const env: Record<string, string> = {};
  if (where.embedded && !where.isolated) {
    const withheld = new Set([...WITHHELD_VARIABLES, options.tokenEnv]);
    for (const [name, value] of Object.entries(own)) {
      if (value !== undefined && VARIABLE_NAME.test(name) && !withheld.has(name)) env[name] = value;
    }
  }
  const out: Record<string, string> = { ...env, ...options.env };
  if (out.PATH !== undefined) out.PATH = absolutePathEntries(out.PATH);
  return out;
}

/**
 * Code that puts `PYTHONPATH`'s directories on the kernel's `sys.path`, where Python puts them at start-up (first,
 * after the script's own directory entry), skipping those already there. A kernel's variables are applied once it
 * runs, after the interpreter has read `PYTHONPATH`; this makes the variable take effect all the same.
 */
export function pythonPathCode(pythonPath: string): string {
  const dirs = pythonPath.split(':').filter((dir) => dir !== '');
  return `def __kernelwarden_pythonpath(dirs):
    import sys
    at = 1 if sys.path and sys.path[0] == '' else 0
    for d in [d for d in dirs if d not in sys.path]:
        sys.path.insert(at, d)
        at += 1
__kernelwarden_pythonpath(${JSON.stringify(dirs)})
del __kernelwarden_pythonpath
`;
}

/**
 * Refuses a `PYTHONPATH` of this command's that its kernels would not get (an isolated kernel and a remote gateway's
 * get only `--env`): it is given on, or refused with the reason, never dropped silently.
 */
export function checkPythonPath(options: StackOptions, own: Record<string, string | undefined>): void {
  if (!own.PYTHONPATH || options.env.PYTHONPATH !== undefined) return;
  if (options.gatewayUrl === undefined && options.hide.length === 0) return;
  const who =
    options.gatewayUrl !== undefined
      ? `a remote gateway's kernel (${options.gatewayUrl}) gets only --env variables`
      : 'a kernel under --hide gets only --env variables';
  throw new UsageError(
    `PYTHONPATH is set here, but ${who}: pass --env PYTHONPATH=… to give it to the kernel${
      options.gatewayUrl !== undefined ? " (directories on the gateway's machine)" : ''
    }, or unset it`,
  );
}

/** The limits `options` ask for (`--memory`, `--max-processes`, `--cpu-time`, `--no-network`), absent ones left out. */
export function stackLimits(
  options: Pick<StackOptions, 'memoryBytes' | 'maxProcesses' | 'cpuSeconds' | 'network'>,
): KernelLimits {
  return {
    ...(options.memoryBytes === undefined ? {} : { memoryBytes: options.memoryBytes }),
    ...(options.maxProcesses === undefined ? {} : { maxProcesses: options.maxProcesses }),
    ...(options.cpuSeconds === undefined ? {} : { cpuSeconds: options.cpuSeconds }),
    ...(options.network === false ? { network: false } : {}),
  };
}

/**
 * The policy of every kernel of the stack: `--hide`/`--allow` with the limits (a read-isolation policy), the limits
 * alone (a limits-only policy: the kernel sees the filesystem as its user does), or none.
 */
export function kernelPolicy(options: StackOptions, limits: KernelLimits): IsolationPolicy | undefined {
  if (options.hide.length === 0)
    return Object.keys(limits).length > 0 ? isolation().createKernelPolicy(limits) : undefined;
  const policy = isolation().createReadIsolationPolicy({
    roots: options.hide.map((dir) => ({ path: resolve(options.cwd, dir), label: `--hide ${dir}` })),
    allowedRoots: options.allow.map((dir) => ({ path: resolve(options.cwd, dir), label: `--allow ${dir}` })),
    ...limits,
  });
  checkWorkspaceNotTemp(options.cwd, policy);
  return policy;
}

/** `--memory, --no-network need…`: the limit flags given, for a refusal that names them. */
export function limitFlagList(limits: KernelLimits): { flags: string; first: LimitName } {
  const names = Object.keys(limits) as LimitName[];
  return { flags: names.map((name) => LIMIT_FLAG_NAMES[name]).join(', '), first: names[0]! };
}

/**
 * The kernel's workspace is its working directory, bound into a private, empty temporary directory: a working
 * directory below the system temporary directory works, but the system temporary directory itself cannot be both.
 * Refused here, before any gateway or kernel starts, with what to do.
 */
function checkWorkspaceNotTemp(cwd: string, policy: IsolationPolicy): void {
  let workspace: string;
  try {
    workspace = realpathSync.native(resolve(cwd));
  } catch {
    return; // a missing directory is reported where it is used
  }
  const temps = new Set([policy.tempDir, '/tmp']);
  try {
    temps.add(realpathSync.native('/tmp'));
  } catch {
    // no /tmp
  }
  if (temps.has(workspace)) {
    throw new UsageError(
      `--hide: the working directory ${workspace} is the system temporary directory, and every isolated kernel ` +
        "gets a private, empty one of its own, so it cannot be the kernel's workspace too: run from a directory " +
        `of its own (mkdir ${resolve(workspace, 'work')} && cd ${resolve(workspace, 'work')}) or pass --cwd DIR`,
    );
  }
}

/**
 * Refuses, before anything starts, what the flags ask for and this stack cannot honour: `--hide`, a limit or
 * `--python` with a remote gateway, and a `PYTHONPATH` its kernels would not get.
 */
export function refuseUnsupported(
  options: StackOptions,
  limits: KernelLimits,
  own: Record<string, string | undefined>,
): void {
  if (options.gatewayUrl !== undefined && options.hide.length > 0) {
    // Checked before anything else: no policy and no layout can make a remote server's kernels isolated.
    throw new (isolation().IsolationUnavailableError)(
      `--hide needs the embedded gateway: a remote gateway (${options.gatewayUrl}) launches kernels we cannot sandbox`,
      { reason: 'remote-gateway' },
    );
  }
  if (options.gatewayUrl !== undefined && Object.keys(limits).length > 0) {
    const { flags, first } = limitFlagList(limits);
    throw new (isolation().IsolationUnavailableError)(
      `${flags} need${flags.includes(',') ? '' : 's'} the embedded gateway: a remote gateway (${options.gatewayUrl}) ` +
        'launches kernels whose limits nothing here can enforce, so none is started',
      { reason: 'remote-gateway', limit: first },
    );
  }
  checkPythonPath(options, own);
  if (options.python !== undefined && options.gatewayUrl !== undefined) {
    throw new UsageError(
      `--python needs the embedded gateway: a remote gateway (${options.gatewayUrl}) runs kernels on its own interpreters`,
    );
  }
}

/**
 * The interpreter the user means (`--python`, `VIRTUAL_ENV`, a `.venv`) on the embedded gateway, checked at once:
 * without ipykernel it is refused with the command that installs it, before any gateway or kernel starts. Every
 * workspace a contained kernel gets is recorded first; a `.venv` found in one (the kernel could have written it) is
 * never chosen automatically — not by this command either — and `onNotice` says so. Sandboxed kernels: the
 * interpreter is never run outside the sandbox, only looked at.
 */
export function chooseInterpreter(
  options: StackOptions,
  sandboxed: boolean,
  own: Record<string, string | undefined>,
  onNotice: ((message: string) => void) | undefined,
): (InterpreterFacts & { source: PythonSource }) | undefined {
  if (options.gatewayUrl !== undefined) return undefined;
  const record = containedWorkspacesPath(own);
  if (sandboxed) recordContainedWorkspace(record, options.cwd);
  const choice = choosePython({
    flag: options.python,
    env: own,
    cwd: options.cwd,
    untrusted: readContainedWorkspaces(record),
    onPassedOver: (venv, workspace) => onNotice?.(passedOverNotice(venv, workspace, options.cwd)),
  });
  return choice ? { ...checkInterpreter(choice, { run: !sandboxed }), source: choice.source } : undefined;
}
