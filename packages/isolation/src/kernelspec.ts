import { createHash, randomBytes } from 'node:crypto';
import { lstatSync, mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { InvalidOptionsError } from '@kernelwarden/core';
import {
  bwrapArguments,
  checkWrapInputs,
  hostFilesystem,
  privateTempDirs,
  type SandboxPolicy,
  sandboxHostPaths,
} from './bubblewrap.js';
import { IsolationPolicyError, IsolationUnavailableError } from './errors.js';
import { resolveKernelArgv, safeLaunchArgv } from './interpreter.js';
import { currentOwner, type SpecOwner } from './kernelspec-owner.js';
import {
  CONNECTION_MARK,
  checkKernelSpecPath,
  LAUNCH_SCRIPT,
  launchCheckArguments,
  recordPaths,
} from './launch-check.js';
import { detectLimits, type LimitFacts, type LimitPlan, planLimits } from './limit-support.js';
import { hasLimits, requestedLimits } from './limits.js';
import { isAbsolutePath, isWithin } from './paths.js';
import { verifyIsolation } from './probe.js';
import { assertSandbox, type DetectSandboxOptions, findExecutable } from './sandbox.js';

/** A kernelspec to wrap, as `GET /api/kernelspecs` returns it (`spec` plus its `name`). */
export interface BaseKernelSpec {
  /** The kernelspec's name, e.g. `python3` or `ir`. */
  name: string;
  /** Its command line, with jupyter's `{connection_file}` placeholder. */
  argv: readonly string[];
  /** Environment variables the gateway sets for the kernel (kept as they are). */
  env?: Readonly<Record<string, string>>;
  /** Shown name; the isolated spec appends ` (isolated)`. */
  display_name: string;
  /** The kernel's language, e.g. `python` or `R`. */
  language: string;
  /** How the gateway interrupts the kernel. @defaultValue 'signal' */
  interrupt_mode?: 'signal' | 'message';
  /** Kept, with a `kernelwarden` entry added describing the isolation. */
  metadata?: Readonly<Record<string, unknown>>;
  /** The base kernelspec's own folder; needed only when `argv` uses `{resource_dir}`. */
  resourceDir?: string;
}

/** Options of `installIsolatedKernelSpec()`. */
export interface InstallIsolatedKernelSpecOptions extends DetectSandboxOptions {
  /**
   * A directory on the local gateway's kernelspec search path (`LocalGateway.acquire()`'s `kernelSpecDir`).
   * Absent (a remote gateway) -> `IsolationUnavailableError` with `reason: 'remote-gateway'`.
   */
  kernelSpecDir: string | undefined;
  /** The kernelspec whose argv is wrapped. */
  baseSpec: BaseKernelSpec;
  /**
   * The policy to enforce (from `createReadIsolationPolicy()`, `createKernelPolicy()` or `teamReadPolicy()`): hidden
   * directories, limits (`memoryBytes`, `maxProcesses`, `cpuSeconds`, `network`), or both.
   */
  policy: SandboxPolicy;
  /** The kernel's working directory: read-write, and its current directory. */
  workspace: string;
  /** More directories the kernel may write (bound read-write). @defaultValue [] */
  extraReadWrite?: readonly string[];
  /** More directories hidden like the policy's roots, e.g. the gateway's state directory. @defaultValue [] */
  hide?: readonly string[];
  /**
   * Directories given a private tmpfs per kernel.
   * @defaultValue [policy.tempDir, '/tmp'], none for a policy without hidden roots
   */
  privateTemp?: readonly string[];
  /**
   * Also hide kernelwarden's state directory (where `LocalGateway` keeps its token): `KERNELWARDEN_STATE_DIR`, else
   * `$XDG_STATE_HOME/kernelwarden`, else `~/.local/state/kernelwarden`, when it exists. @defaultValue true
   */
  hideStateDir?: boolean;
  /**
   * Replaces a bare `python`/`python3` `argv[0]` of the base spec, as jupyter would with its own interpreter.
   * @defaultValue the interpreter `jupyter-server` on the search path runs on
   */
  pythonExecutable?: string;
  /**
   * The pid of the jupyter-server that will launch the kernels (a LocalGateway ticket's `pid`): kernels' cgroups are
   * made in its cgroups, so that is where `detectLimits()` looks. @defaultValue process.pid
   */
  gatewayPid?: number;
  /**
   * What this machine can enforce (`detectLimits()`'s answer, or facts staged by a test); given, nothing is detected.
   * @defaultValue detectLimits({ pid: gatewayPid }) when the policy has limits
   */
  limitSupport?: LimitFacts;
  /**
   * The process the spec belongs to: it is part of the spec's name, `sweepIsolatedKernelSpecs()` removes the spec
   * once that process is gone, and `removeIsolatedKernelSpecs()` is for the process that installed it. The LocalGateway
   * server's pid (a ticket's `pid`) makes one spec per request shared by every process of the user on that server —
   * what a warm pool of isolated kernels needs (`ticket.pool.keep(name, base)`): it lives as long as the server.
   * Must be a live process of this user. @defaultValue process.pid
   */
  ownerPid?: number;
}

/** The host's GPU device nodes (NVIDIA, AMD's kfd, DRI, accel), which a limits-only kernel keeps in its `/dev`. */
function gpuDevices(): string[] {
  const devices: string[] = [];
  const add = (dir: string, keep: (name: string) => boolean) => {
    let names: string[] = [];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names.filter(keep).sort()) {
      try {
        if (lstatSync(join(dir, name)).isCharacterDevice()) devices.push(join(dir, name));
      } catch {
        // gone meanwhile
      }
    }
  };
  add('/dev', (name) => name.startsWith('nvidia') || name === 'kfd');
  add('/dev/dri', () => true);
  add('/dev/accel', () => true);
  return devices;
}

/** The prlimit command that sets every rlimit of `plan` (soft and hard alike) and runs the rest. */
function prlimitPrefix(plan: LimitPlan | undefined): string[] {
  if (!plan?.prlimitPath) return [];
  const set = (name: string, value: number | undefined) => (value === undefined ? [] : [`--${name}=${value}:${value}`]);
  return [
    plan.prlimitPath,
    ...set('data', plan.rlimits.data),
    ...set('nproc', plan.rlimits.nproc),
    ...set('cpu', plan.rlimits.cpu),
    '--',
  ];
}

/** kernelwarden's state directory, as `LocalGateway` chooses it: `KERNELWARDEN_STATE_DIR`, XDG, or the default. */
export function kernelwardenStateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.KERNELWARDEN_STATE_DIR) return resolve(env.KERNELWARDEN_STATE_DIR);
  if (env.XDG_STATE_HOME) return join(resolve(env.XDG_STATE_HOME), 'kernelwarden');
  return join(homedir(), '.local', 'state', 'kernelwarden');
}

function existingStateDir(): string[] {
  try {
    return [realpathSync.native(kernelwardenStateDir())];
  } catch {
    return [];
  }
}

function validateBase(spec: BaseKernelSpec): void {
  const issues: { path: string; message: string }[] = [];
  if (typeof spec?.name !== 'string' || !/^[A-Za-z0-9._-]+$/.test(spec.name))
    issues.push({ path: 'baseSpec.name', message: 'expected a kernelspec name' });
  if (!Array.isArray(spec?.argv) || spec.argv.length === 0 || spec.argv.some((a) => typeof a !== 'string'))
    issues.push({ path: 'baseSpec.argv', message: 'expected a non-empty array of strings' });
  else if (spec.argv.some((a) => a.includes('{resource_dir}')) && !isAbsolutePath(spec.resourceDir))
    issues.push({ path: 'baseSpec.resourceDir', message: 'argv uses {resource_dir}: give the base spec folder' });
  if (issues.length > 0) throw new InvalidOptionsError(issues, { subject: 'isolated kernelspec' });
}

/**
 * Refuses a kernel whose interpreter would be hidden by the policy: it would only fail later, as a kernel that
 * dies at start-up, with a far less helpful message.
 */
function checkInterpreterVisible(policy: SandboxPolicy, command: string, searchPath: string | undefined): void {
  const lexical = isAbsolutePath(command) ? command : findExecutable(command, searchPath);
  if (!lexical) return;
  let real = lexical;
  try {
    real = realpathSync.native(lexical);
  } catch {
    // a missing interpreter fails at launch like it would without isolation
  }
  for (const path of new Set([lexical, real])) {
    const root = policy.roots.find((r) => isWithin(path, r));
    if (root && !policy.allowedRoots.some((a) => isWithin(path, a))) {
      throw new IsolationPolicyError(
        `The kernel's interpreter ${path} lies in the hidden root ${root}: the kernel could not start; allow its ` +
          'installation directory or use an interpreter outside the hidden roots',
        { path },
      );
    }
  }
}

/** The canonical path of an existing directory the caller named, or `IsolationPolicyError`. */
function canonicalExisting(path: string, what: string, field: string): string {
  if (!isAbsolutePath(path)) {
    throw new InvalidOptionsError([{ path: field, message: 'expected an absolute path' }], {
      subject: 'isolated kernelspec',
    });
  }
  try {
    return realpathSync.native(path);
  } catch (cause) {
    throw new IsolationPolicyError(`${what} does not exist: ${path}`, { path, cause });
  }
}

/**
 * Refuses a workspace (or read-write directory) that is itself a private temporary directory: every launch gives
 * that directory a fresh, empty tmpfs, so it cannot also be the kernel's own folder, and binding it back would share
 * the host's temporary directory with the kernel. A directory below it is fine: it is bound into the private one.
 */
function checkWorkspaceNotTemp(
  policy: SandboxPolicy,
  wrap: { workspace: string; readWrite: string[]; privateTemp?: readonly string[] },
): void {
  const temps = new Set<string>();
  for (const dir of privateTempDirs(policy, wrap)) {
    temps.add(dir);
    try {
      temps.add(realpathSync.native(dir));
    } catch {
      // a private temp that does not exist yet on the host is created inside the sandbox
    }
  }
  const named = [
    { dir: wrap.workspace, what: "The kernel's working directory" },
    ...wrap.readWrite.map((dir) => ({ dir, what: 'The read-write directory' })),
  ];
  for (const { dir, what } of named) {
    if (temps.has(dir)) {
      throw new IsolationPolicyError(
        `${what} ${dir} is a temporary directory every isolated kernel gets a private, empty copy of: it cannot ` +
          `be shared with the kernel too; use a directory of its own (e.g. ${join(dir, 'work')}) or one outside it`,
        { path: dir },
      );
    }
  }
}

/**
 * Writes a kernelspec into a local gateway's kernelspec directory that launches `baseSpec`'s command under
 * bubblewrap with `policy` enforced, and returns its name — start kernels with that name
 * (`GatewayKernel.start({ kernelName })`). The name is `kw-iso-<base>-<hash of policy, base spec, workspace,
 * options, the directories' identities and the installing process>`, so the same request from the same process
 * reuses the same spec. The spec records that process as its owner: remove it with `removeIsolatedKernelSpecs()` when
 * the session ends; `sweepIsolatedKernelSpecs()` removes those whose owner is gone.
 *
 * Use it on the launch path of every kernel a session with a read policy starts. It first checks the sandbox
 * (`assertSandbox()`) and runs the self-test probe (`verifyIsolation()`); if either fails it throws
 * `IsolationUnavailableError` and writes nothing, so the kernel is never launched unisolated. A remote gateway (no
 * `kernelSpecDir`) is refused the same way. Then it records the identity (device, inode) of every directory the
 * sandbox mounts and of each of their ancestors; every launch of the spec (restarts included) checks them first and
 * refuses to start the kernel, with a one-line reason on stderr, when any was moved, replaced, swapped for a symbolic
 * link or removed. At launch, the gateway's runtime directory (other kernels' keys, the server's token) is hidden and
 * only this kernel's connection file is bound back. A workspace that is itself a private temporary directory (the
 * system temporary directory) is refused with `IsolationPolicyError`.
 *
 * Limits (`memoryBytes`, `maxProcesses`, `cpuSeconds`, `network: false`) are planned with `detectLimits()` (or
 * `limitSupport`) and `planLimits()`: one nothing here can enforce is refused with `IsolationUnavailableError`
 * (reason `limit-unenforceable`, `limit` naming it) before anything is written. At every launch the launcher makes
 * the kernel's cgroup `kw-<spec hash>-<kernel id>` in the gateway's cgroup (reused by restarts), sets its limits and
 * joins it before exec'ing `prlimit` (the rlimits) and bwrap (`--unshare-net`); a launch that cannot set a limit up
 * fails with a one-line reason naming it. Every kernel under a policy — limits only included — sees the host's
 * filesystem read-only and writes only its workspace, `extraReadWrite` and its private temp: nothing it writes runs
 * in a later kernel or in a program of the host (IPython startup files, `usercustomize.py`, `.Rprofile`, binaries
 * the launcher runs). A limits-only kernel keeps the host's GPU device nodes.
 */
export async function installIsolatedKernelSpec(opts: InstallIsolatedKernelSpecOptions): Promise<string> {
  const specDir = localKernelSpecDir(opts.kernelSpecDir);
  const { workspace, argvBase, wrap } = resolveMounts(opts);
  checkLaunchable(opts, argvBase, wrap);
  const sandbox = await assertSandbox(opts);
  const plan = await planKernelLimits(opts);
  const cgroupDirs = [...new Set(plan?.cgroups.map((c) => c.controller.base) ?? [])];
  await verifyIsolation(opts.policy, {
    ...wrap,
    cgroupDirs,
    searchPath: opts.searchPath,
    signal: opts.signal,
    timeoutMs: opts.timeoutMs,
  });
  // Recorded after the probe (which writes in the hidden roots and the workspace): checked at every launch.
  const record = recordPaths(sandboxHostPaths(opts.policy, wrap));
  const owner = currentOwner(opts.ownerPid);
  const argvWith = (tag: string) => [
    '/bin/sh',
    '-c',
    LAUNCH_SCRIPT,
    'kernelwarden-isolated-kernel',
    '{connection_file}',
    ...launchCheckArguments(sandbox.statPath, record, { tag, limits: plan?.cgroups ?? [] }),
    ...prlimitPrefix(plan),
    sandbox.envPath,
    '--ignore-signal=INT',
    sandbox.bwrapPath,
    ...bwrapArguments(opts.policy, wrap, [CONNECTION_MARK]),
    '--',
    sandbox.envPath,
    '--default-signal=INT',
    ...argvBase,
  ];
  const { name, spec } = isolatedSpec(opts, { workspace, owner, plan, cgroupDirs, argvWith });
  writeKernelSpec(join(specDir, name), spec);
  return name;
}

/** The kernelspec directory of a local gateway; throws for a remote gateway (none) and a relative path. */
function localKernelSpecDir(kernelSpecDir: string | undefined): string {
  if (kernelSpecDir === undefined || kernelSpecDir === '') {
    throw new IsolationUnavailableError(
      'This gateway has no local kernelspec directory (a remote gateway): read isolation cannot be enforced on its ' +
        'kernels, so none is started; use the embedded LocalGateway',
      { reason: 'remote-gateway' },
    );
  }
  if (!isAbsolutePath(kernelSpecDir)) {
    throw new InvalidOptionsError([{ path: 'kernelSpecDir', message: 'expected an absolute path' }], {
      subject: 'isolated kernelspec',
    });
  }
  return kernelSpecDir;
}

/** What the sandbox of a kernel is made of: these, with `hide` and `readWrite` in `wrap`. */
interface ResolvedMounts {
  /** The canonical workspace. */
  workspace: string;
  /** The base spec's argv, ready to run (`{resource_dir}` filled in, the interpreter resolved, safe to launch). */
  argvBase: string[];
  wrap: {
    workspace: string;
    readWrite: string[];
    hide: string[];
    devices?: string[];
    privateTemp?: readonly string[];
  };
}

/**
 * The base spec checked and its argv resolved, the directories made canonical (each must exist), and what is hidden:
 * the caller's `hide`, kernelwarden's state directory and the kernelspecs themselves (unless already hidden).
 */
function resolveMounts(opts: InstallIsolatedKernelSpecOptions): ResolvedMounts {
  validateBase(opts.baseSpec);
  const workspace = canonicalExisting(opts.workspace, 'kernel workspace', 'workspace');
  const argvBase = safeLaunchArgv(
    resolveKernelArgv(
      opts.baseSpec.argv.map((a) => a.replaceAll('{resource_dir}', opts.baseSpec.resourceDir ?? '')),
      { pythonExecutable: opts.pythonExecutable, searchPath: opts.searchPath ?? process.env.PATH },
    ),
  );
  const hide = [
    ...new Set([
      ...(opts.hide ?? []).map((dir, i) => canonicalExisting(dir, 'hidden directory', `hide.${i}`)),
      ...(opts.hideStateDir === false ? [] : existingStateDir()),
    ]),
  ];
  // The kernelspecs themselves (unless already hidden): a kernel that could rewrite its own spec would launch
  // unisolated next time.
  const specDir = canonicalExisting(opts.kernelSpecDir ?? '', 'kernelspec directory', 'kernelSpecDir');
  if (![...opts.policy.roots, ...hide].some((dir) => isWithin(specDir, dir))) hide.push(specDir);
  const wrap = {
    workspace,
    readWrite: (opts.extraReadWrite ?? []).map((dir, i) =>
      canonicalExisting(dir, 'read-write directory', `extraReadWrite.${i}`),
    ),
    hide,
    ...(hostFilesystem(opts.policy) ? { devices: gpuDevices() } : {}),
    ...(opts.privateTemp ? { privateTemp: opts.privateTemp } : {}),
  };
  return { workspace, argvBase, wrap };
}

/**
 * Refuses, before anything runs, a sandbox that cannot be built as asked: bad wrap inputs, a workspace that is a
 * private temporary directory, a mounted path a launch could not check, an interpreter the sandbox would not see.
 */
function checkLaunchable(
  opts: InstallIsolatedKernelSpecOptions,
  argvBase: readonly string[],
  wrap: ResolvedMounts['wrap'],
): void {
  checkWrapInputs(opts.policy, argvBase, wrap);
  checkWorkspaceNotTemp(opts.policy, wrap);
  for (const path of [...sandboxHostPaths(opts.policy, wrap), ...privateTempDirs(opts.policy, wrap)])
    checkKernelSpecPath(path);
  checkInterpreterVisible(opts.policy, argvBase[0]!, opts.searchPath ?? process.env.PATH);
}

/** Each limit by the strongest mechanism here, or a refusal naming the first one nothing can enforce. */
async function planKernelLimits(opts: InstallIsolatedKernelSpecOptions): Promise<LimitPlan | undefined> {
  if (!hasLimits(opts.policy)) return undefined;
  return planLimits(
    opts.policy,
    opts.limitSupport ??
      (await detectLimits({
        pid: opts.gatewayPid,
        searchPath: opts.searchPath,
        signal: opts.signal,
        timeoutMs: opts.timeoutMs,
      })),
  );
}

/**
 * The isolated kernelspec and its name, `kw-iso-<base>-<hash>`: the hash covers the base spec, the policy, its
 * limits, the launch argv (with a placeholder tag: the kernels' cgroups are named after the hash, which cannot cover
 * itself) and the owner.
 */
function isolatedSpec(
  opts: InstallIsolatedKernelSpecOptions,
  parts: {
    workspace: string;
    owner: SpecOwner;
    plan: LimitPlan | undefined;
    cgroupDirs: string[];
    argvWith: (tag: string) => string[];
  },
): { name: string; spec: Record<string, unknown> } {
  const { workspace, owner, plan, cgroupDirs, argvWith } = parts;
  const limits = requestedLimits(opts.policy);
  const identity = JSON.stringify({
    base: opts.baseSpec,
    roots: opts.policy.roots,
    allowedRoots: opts.policy.allowedRoots,
    tempDir: opts.policy.tempDir,
    limits,
    // The kernels' cgroups are named after this hash, which cannot cover itself.
    argv: argvWith('0'.repeat(16)),
    owner,
  });
  const hash = createHash('sha256').update(identity).digest('hex').slice(0, 16);
  const name = `kw-iso-${opts.baseSpec.name.toLowerCase()}-${hash}`;
  const spec = {
    argv: argvWith(hash),
    display_name: `${opts.baseSpec.display_name} (isolated)`,
    language: opts.baseSpec.language,
    ...(opts.baseSpec.env ? { env: opts.baseSpec.env } : {}),
    interrupt_mode: opts.baseSpec.interrupt_mode ?? 'signal',
    metadata: {
      ...opts.baseSpec.metadata,
      kernelwarden: {
        isolatedFrom: opts.baseSpec.name,
        roots: opts.policy.roots,
        allowedRoots: opts.policy.allowedRoots,
        workspace,
        owner,
        ...(plan
          ? {
              limits: {
                ...limits,
                mechanisms: plan.mechanisms,
                // Where this spec's kernels' cgroups are made: removed with the spec once empty.
                cgroupDirs,
              },
            }
          : {}),
      },
    },
  };
  return { name, spec };
}

/** Writes `spec` as `<dir>/kernel.json` (0600, in a 0700 directory) in one step, unless it already says the same. */
function writeKernelSpec(dir: string, spec: Record<string, unknown>): void {
  const text = `${JSON.stringify(spec, null, 1)}\n`;
  const file = join(dir, 'kernel.json');
  try {
    if (readFileSync(file, 'utf8') === text) return;
  } catch {
    // not written yet
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const temporary = join(dir, `.kernel.json.${randomBytes(4).toString('hex')}`);
  writeFileSync(temporary, text, { mode: 0o600 });
  renameSync(temporary, file);
}
