import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { detectLimits, type LimitMechanism, type LimitName, type LimitSupport } from '@kernelwarden/isolation';
import { containedWorkspacesPath, readContainedWorkspaces } from './contained-workspaces.js';
import { ExitCode } from './exit-code.js';
import { LIMIT_FLAG_NAMES } from './limit-flags.js';
import { absolutePathEntries } from './path-entries.js';
import { choosePython, INTERPRETER_PROBE, parseProbe, pythonOptIn } from './python-interpreter.js';

/** One line of `kernelwarden doctor`: what was checked, what was found, and how to fix it when missing. */
export interface DoctorCheck {
  /** What was checked (`'jupyter-server'`). */
  name: string;
  /** True when it is there and works. */
  ok: boolean;
  /** What was found (a version, a path) or what went wrong. */
  detail: string;
  /** The command or step that fixes it; present when `ok` is false. */
  fix?: string;
  /** False for things only some features need (R for `--lang r`, bubblewrap for `--hide`, the limits). */
  required: boolean;
  /** On a limit's line: what enforces it here, strongest first (`cgroup-v1`, `rlimit`, …); empty when nothing does. */
  mechanisms?: readonly LimitMechanism[];
}

/**
 * How the doctor looks at the machine; the default runs real commands. Tests pass a fake.
 */
export interface DoctorProbe {
  /** Runs a program; `status` is null when it could not start. */
  run(cmd: string, args: readonly string[]): { status: number | null; stdout: string; stderr: string };
  /** Reads a small file, or undefined when it cannot. */
  readFile(path: string): string | undefined;
  /** The running Node.js version (`process.versions.node`). */
  nodeVersion: string;
  /** The environment (`KERNELWARDEN_JUPYTER_SERVER` chooses the jupyter-server). @defaultValue none set */
  env?: Readonly<Record<string, string | undefined>>;
  /** Where a `.venv` is looked for (this directory and those above). @defaultValue no `.venv` is looked for */
  cwd?: string;
}

/** The real machine. */
export const systemProbe: DoctorProbe = {
  run(cmd, args) {
    // Programs are looked up through PATH's absolute entries only (`sh`, and `command -v` in it): an empty or relative
    // entry names the current directory, whose programs are not the ones kernels run.
    const env = { ...process.env, PATH: absolutePathEntries(process.env.PATH ?? '') };
    const r = spawnSync(cmd, [...args], { encoding: 'utf8', timeout: 20_000, stdio: ['ignore', 'pipe', 'pipe'], env });
    return { status: r.error ? null : r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
  },
  readFile(path) {
    try {
      return readFileSync(path, 'utf8');
    } catch {
      return undefined;
    }
  },
  nodeVersion: process.versions.node,
  get env() {
    return process.env;
  },
  get cwd() {
    return process.cwd();
  },
};

const APT = 'sudo apt-get install -y';

function which(probe: DoctorProbe, cmd: string): string | undefined {
  const quoted = /^[\w./+-]+$/.test(cmd) ? cmd : `'${cmd.replaceAll("'", "'\\''")}'`;
  const r = probe.run('sh', ['-c', `command -v ${quoted}`]);
  const path = r.stdout.trim();
  return r.status === 0 && path ? path : undefined;
}

/**
 * The interpreter jupyter-server runs under (its shebang): the one whose `jupyter_client` knows the kernelspecs
 * the server will offer.
 */
function serverPython(probe: DoctorProbe, serverPath: string): string | undefined {
  const first = probe.readFile(serverPath)?.split('\n', 1)[0];
  if (first?.startsWith('#!')) {
    const words = first.slice(2).trim().split(/\s+/);
    // `#!/usr/bin/env python3` -> python3
    return words[0]?.endsWith('/env') ? words[1] : words[0];
  }
  return undefined;
}

/** The workspaces contained kernels were given (`run` passes over a `.venv` in them); none when unknown. */
function untrustedWorkspaces(env: Record<string, string | undefined>): string[] {
  try {
    return readContainedWorkspaces(containedWorkspacesPath(env));
  } catch {
    return [];
  }
}

/**
 * Which interpreter Python kernels run, and its ipykernel: `VIRTUAL_ENV`'s or the nearest `.venv`'s (as `run` would
 * choose it here), else the python3 kernelspec's own.
 */
function checkPythonKernel(probe: DoctorProbe, serverPath: string | undefined): DoctorCheck {
  const name = 'python kernel';
  let passedOver: string | undefined;
  const choice = choosePython({
    flag: undefined,
    env: probe.env ?? {},
    cwd: probe.cwd ?? '/',
    untrusted: untrustedWorkspaces(probe.env ?? {}),
    onPassedOver: (venv, workspace) => {
      passedOver = `${venv} is not used: it lies in ${workspace}, a contained kernel's workspace (opt in with ${pythonOptIn(venv, probe.cwd ?? '/')})`;
    },
  });
  let interpreter = choice?.path;
  const from =
    (choice ? (choice.source === '.venv' ? 'the nearest .venv' : 'VIRTUAL_ENV') : 'the python3 kernelspec') +
    (passedOver ? `; ${passedOver}` : '');
  if (!interpreter) {
    const python = serverPath ? serverPython(probe, serverPath) : undefined;
    const r = python
      ? probe.run(python, [
          '-c',
          'from jupyter_client.kernelspec import KernelSpecManager; print(KernelSpecManager().get_kernel_spec("python3").argv[0])',
        ])
      : undefined;
    interpreter = r?.status === 0 ? r.stdout.trim() || undefined : undefined;
    if (interpreter && !interpreter.includes('/')) interpreter = which(probe, interpreter) ?? interpreter;
  }
  if (!interpreter) {
    return {
      name,
      ok: false,
      detail: 'cannot tell which interpreter the python3 kernelspec runs',
      fix: 'see the jupyter-server and kernelspec python3 lines',
      required: false,
    };
  }
  const ran = probe.run(interpreter, ['-c', INTERPRETER_PROBE]);
  const facts = ran.status === 0 ? parseProbe(interpreter, ran.stdout) : undefined;
  if (!facts) {
    return {
      name,
      ok: false,
      detail: `${interpreter} (from ${from}) does not run`,
      fix: choice ? 'fix or remove that environment, or pass --python PATH' : 'reinstall the python3 kernelspec',
      required: true,
    };
  }
  const ok = facts.ipykernel !== undefined;
  return {
    name,
    ok,
    detail: `${interpreter} (Python ${facts.version}${ok ? `, ipykernel ${facts.ipykernel}` : ', no ipykernel'}), from ${from}`,
    ...(ok ? {} : { fix: `${interpreter} -m pip install ipykernel` }),
    required: true,
  };
}

function checkNode(probe: DoctorProbe): DoctorCheck {
  const [major = 0, minor = 0] = probe.nodeVersion.split('.').map(Number);
  const ok = major > 20 || (major === 20 && minor >= 19);
  return {
    name: 'Node.js',
    ok,
    detail: `v${probe.nodeVersion}${ok ? '' : ' (kernelwarden needs >= 20.19)'}`,
    ...(ok ? {} : { fix: 'install Node.js 20.19 or newer (https://nodejs.org, or `nvm install 22`)' }),
    required: true,
  };
}

function checkKernelSpecs(probe: DoctorProbe, serverPath: string | undefined): DoctorCheck[] {
  let specs: Record<string, string> = {};
  let listed = false;
  let problem = 'jupyter-server is missing';
  const python = serverPath ? serverPython(probe, serverPath) : undefined;
  if (serverPath && !python) problem = `cannot tell which Python runs ${serverPath}`;
  if (python) {
    const r = probe.run(python, [
      '-c',
      'import json; from jupyter_client.kernelspec import find_kernel_specs; print(json.dumps(find_kernel_specs()))',
    ]);
    try {
      if (r.status === 0) {
        specs = JSON.parse(r.stdout);
        listed = true;
      } else {
        problem = `${python} cannot list kernelspecs: ${r.stderr.trim().split('\n').at(-1)}`;
      }
    } catch {
      problem = `${python} printed no kernelspec list`;
    }
  }
  const python3 = specs.python3;
  const ir = specs.ir;
  return [
    {
      name: 'kernelspec python3',
      ok: python3 !== undefined,
      detail: python3 ?? (listed ? `not found by ${python}` : problem),
      ...(python3
        ? {}
        : {
            fix: `${APT} python3-ipykernel   (or: ${python ?? 'python3'} -m pip install ipykernel && ${python ?? 'python3'} -m ipykernel install --sys-prefix)`,
          }),
      required: true,
    },
    {
      name: 'kernelspec ir',
      ok: ir !== undefined,
      detail: ir ?? (listed ? `not found by ${python}` : problem),
      ...(ir
        ? {}
        : {
            fix: `${APT} r-cran-irkernel && sudo R -e "IRkernel::installspec(user = FALSE)"   (or in R: install.packages('IRkernel'); IRkernel::installspec())`,
          }),
      required: false,
    },
  ];
}

function checkSandbox(probe: DoctorProbe): DoctorCheck[] {
  const bwrap = which(probe, 'bwrap');
  const checks: DoctorCheck[] = [];
  checks.push({
    name: 'bubblewrap',
    ok: bwrap !== undefined,
    detail: bwrap ?? 'bwrap is not on PATH (needed for --hide/--allow)',
    ...(bwrap ? {} : { fix: `${APT} bubblewrap   (Fedora: sudo dnf install bubblewrap)` }),
    required: false,
  });
  const maxUserNs = probe.readFile('/proc/sys/user/max_user_namespaces')?.trim();
  const debianClone = probe.readFile('/proc/sys/kernel/unprivileged_userns_clone')?.trim();
  const apparmor = probe.readFile('/proc/sys/kernel/apparmor_restrict_unprivileged_userns')?.trim();
  let works = false;
  let why = '';
  if (bwrap) {
    const r = probe.run('bwrap', ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--unshare-pid', 'true']);
    works = r.status === 0;
    why = r.stderr.trim().split('\n')[0] ?? '';
  }
  let fix: string | undefined;
  if (!works) {
    if (maxUserNs === '0') fix = 'sudo sysctl -w user.max_user_namespaces=15000';
    else if (debianClone === '0') fix = 'sudo sysctl -w kernel.unprivileged_userns_clone=1';
    else if (apparmor === '1')
      fix = 'sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (or add an AppArmor profile for bwrap)';
    else if (!bwrap) fix = 'install bubblewrap first';
    else
      fix = 'run outside a container that forbids namespaces, or give the container --security-opt seccomp=unconfined';
  }
  checks.push({
    name: 'namespaces (bwrap sandbox)',
    ok: works,
    detail: works
      ? 'bwrap can create a sandbox (--hide/--allow are enforceable)'
      : bwrap
        ? `bwrap cannot create a sandbox${why ? `: ${why}` : ''}`
        : 'not checked (no bwrap)',
    ...(fix ? { fix } : {}),
    required: false,
  });
  return checks;
}

/**
 * Checks what kernelwarden needs on this machine and says how to fix what is missing.
 *
 * Use it behind `kernelwarden doctor`, or before starting a stack to explain a failure.
 */
export function runDoctor(probe: DoctorProbe = systemProbe): DoctorCheck[] {
  const checks: DoctorCheck[] = [checkNode(probe)];
  // The same jupyter-server LocalGateway runs: KERNELWARDEN_JUPYTER_SERVER (a path or a name on PATH), else PATH's.
  const chosen = probe.env?.KERNELWARDEN_JUPYTER_SERVER || undefined;
  const server = which(probe, chosen ?? 'jupyter-server');
  const version = server ? probe.run(server, ['--version']).stdout.trim() : '';
  const via = chosen ? ', from KERNELWARDEN_JUPYTER_SERVER' : '';
  checks.push({
    name: 'jupyter-server',
    ok: server !== undefined,
    detail: server
      ? `${server}${version ? ` (${version}${via})` : via ? ` (${via.slice(2)})` : ''}`
      : chosen
        ? `KERNELWARDEN_JUPYTER_SERVER=${chosen} is not an executable`
        : 'jupyter-server is not on PATH',
    ...(server
      ? {}
      : chosen
        ? {
            fix: 'point KERNELWARDEN_JUPYTER_SERVER at a jupyter-server executable (e.g. <venv>/bin/jupyter-server), or unset it',
          }
        : { fix: `${APT} jupyter-server python3-ipykernel   (or: pip install jupyter_server ipykernel)` }),
    required: true,
  });
  checks.push(...checkKernelSpecs(probe, server));
  checks.push(checkPythonKernel(probe, server));
  const r = which(probe, 'R');
  const rVersion = r ? (probe.run(r, ['--version']).stdout.split('\n', 1)[0] ?? '') : '';
  checks.push({
    name: 'R',
    ok: r !== undefined,
    detail: r ? `${r}${rVersion ? ` (${rVersion.trim()})` : ''}` : 'R is not on PATH (needed for --lang r)',
    ...(r ? {} : { fix: `${APT} r-base-core r-cran-irkernel` }),
    required: false,
  });
  checks.push(...checkSandbox(probe));
  return checks;
}

const LIMIT_FIXES: Partial<Record<LimitName, string>> = {
  memoryBytes: 'install util-linux (prlimit), or run where a memory cgroup is writable',
  maxProcesses:
    'run as a non-root user, or where a pids cgroup is writable (e.g. systemd-run --user --scope -p Delegate=yes)',
  cpuSeconds: 'install util-linux (prlimit)',
  network: 'let bubblewrap create network namespaces (see the namespaces check)',
};

/**
 * One doctor line per kernel limit: whether `--memory`, `--max-processes`, `--cpu-time` and `--no-network` can be
 * enforced here, and by what (a cgroup, an rlimit, a network namespace), from `detectLimits()`'s answer.
 *
 * Use it after `runDoctor()` (`[...runDoctor(), ...limitChecks(await detectLimits())]`): detection is asynchronous.
 */
export function limitChecks(support: LimitSupport): DoctorCheck[] {
  return (Object.keys(LIMIT_FLAG_NAMES) as LimitName[]).map((limit) => {
    const status = support.limits[limit];
    const fix = LIMIT_FIXES[limit];
    return {
      name: `limit ${LIMIT_FLAG_NAMES[limit]}`,
      ok: status.enforceable,
      detail: status.detail,
      ...(!status.enforceable && fix ? { fix } : {}),
      required: false,
      mechanisms: status.mechanisms,
    };
  });
}

/** How `doctorChecks()` looks at the machine; tests pass fakes. */
export interface DoctorSources {
  /** The commands and files the checks read. @defaultValue `systemProbe` */
  probe?: DoctorProbe;
  /**
   * Which limits this machine can enforce, for kernels of a gateway this process starts (its cgroups are this
   * process's). @defaultValue `detectLimits()` of `@kernelwarden/isolation`
   */
  detectLimits?: () => Promise<LimitSupport>;
}

/**
 * Everything `kernelwarden doctor` reports: `runDoctor()`'s checks, then one line per limit flag saying whether it can
 * be enforced here and by what (`limitChecks()`). The limit lines are warnings: they never make the doctor fail.
 */
export async function doctorChecks(sources: DoctorSources = {}): Promise<DoctorCheck[]> {
  const checks = runDoctor(sources.probe ?? systemProbe);
  const support = await (sources.detectLimits ?? (() => detectLimits()))();
  return [...checks, ...limitChecks(support)];
}

/**
 * `kernelwarden doctor [--json]`: prints the checks (`formatDoctor()`, or `{ checks }` as JSON) and resolves with the
 * exit code: 1 when something required is missing, else 0.
 */
export async function doctorCommand(
  json: boolean,
  io: { stdout: { write(text: string): unknown } },
  sources: DoctorSources = {},
): Promise<ExitCode> {
  const checks = await doctorChecks(sources);
  io.stdout.write(json ? `${JSON.stringify({ checks }, null, 2)}\n` : `${formatDoctor(checks)}\n`);
  return checks.some((c) => c.required && !c.ok) ? ExitCode.cellError : ExitCode.ok;
}

/**
 * Renders doctor checks for a terminal, one line each with the fix indented below.
 *
 * Use it with `runDoctor()`.
 */
export function formatDoctor(checks: readonly DoctorCheck[]): string {
  const lines: string[] = [];
  for (const check of checks) {
    const mark = check.ok ? 'ok  ' : check.required ? 'FAIL' : 'warn';
    lines.push(`${mark}  ${check.name}: ${check.detail}`);
    if (!check.ok && check.fix) lines.push(`      fix: ${check.fix}`);
  }
  const missing = checks.filter((c) => !c.ok);
  lines.push(
    missing.length === 0
      ? 'Everything kernelwarden needs is here.'
      : `${missing.length} missing: ${missing.map((c) => c.name).join(', ')}. In a kernelwarden checkout, node scripts/setup-jupyter.mjs installs them all.`,
  );
  return lines.join('\n');
}
