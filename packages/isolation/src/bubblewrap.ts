import { dirname } from 'node:path';
import { InvalidOptionsError, type ReadIsolationPolicy } from '@kernelwarden/core';
import { IsolationUnavailableError } from './errors.js';
import { type KernelLimits, LIMIT_LABELS, limitIssues } from './limits.js';
import { depth, isAbsolutePath, isWithin } from './paths.js';

/** A policy as the sandbox reads it: read isolation, and the limits it may carry. */
export type SandboxPolicy = ReadIsolationPolicy & KernelLimits;

/**
 * Environment variables removed from every sandboxed command: credentials a kernel could use to reach the
 * gateway (and from there start an unisolated kernel), and `JPY_PARENT_PID` (inside the PID namespace the kernel's
 * parent is pid 1, which ipykernel's parent poller would read as "my parent died").
 */
export const SANDBOX_UNSET_ENV: readonly string[] = Object.freeze([
  'JUPYTER_TOKEN',
  'JPY_API_TOKEN',
  'JUPYTERHUB_API_TOKEN',
  'KERNELWARDEN_GATEWAY_TOKEN',
  'JPY_PARENT_PID',
]);

/** Options of `wrapCommand()`. */
export interface WrapCommandOptions {
  /** The kernel's working directory: bound read-write and made the current directory. Absolute, canonical. */
  workspace: string;
  /** More directories bound read-write (after the hidden roots, so they win inside one). @defaultValue [] */
  readWrite?: readonly string[];
  /** More files or directories bound read-only (after the hidden roots). @defaultValue [] */
  readOnly?: readonly string[];
  /** More directories hidden like the policy's roots (e.g. a gateway's state directory). @defaultValue [] */
  hide?: readonly string[];
  /**
   * The kernel's connection file. Its directory (the gateway's runtime directory, which holds other kernels' keys
   * and the server's own token) is hidden, and the file alone is bound back read-write (ipykernel rewrites it).
   */
  connectionFile?: string;
  /** The bubblewrap executable. @defaultValue 'bwrap' (looked up on PATH when the command runs) */
  bwrapPath?: string;
  /** GNU `env`, used to keep SIGINT from killing bwrap and to give it back to the kernel. @defaultValue '/usr/bin/env' */
  envPath?: string;
  /** Variables set inside the sandbox (after `TMPDIR=/tmp` and friends). @defaultValue {} */
  setEnv?: Readonly<Record<string, string>>;
  /**
   * Directories replaced by a fresh, private tmpfs for this command; the first becomes `TMPDIR`.
   * @defaultValue [policy.tempDir, '/tmp'] (the canonical system temporary directory, and /tmp)
   */
  privateTemp?: readonly string[];
  /**
   * Device nodes of the host bound into the sandbox's fresh `/dev` (usable, but no file can be made beside them).
   * @defaultValue [] (`installIsolatedKernelSpec` passes the host's GPU nodes for a policy without hidden roots)
   */
  devices?: readonly string[];
  /** Variables removed inside the sandbox. @defaultValue SANDBOX_UNSET_ENV */
  unsetEnv?: readonly string[];
}

/** How a mount makes its directory look inside the sandbox. */
type MountKind = 'temp' | 'hidden' | 'read-only' | 'read-write';

interface MountOp {
  path: string;
  kind: MountKind;
  args: string[];
}

/** Thrown-if-bad checks shared by `wrapCommand()` and the kernelspec installer. */
export function checkWrapInputs(policy: SandboxPolicy, argv: readonly string[], opts: WrapCommandOptions): void {
  const issues: { path: string; message: string }[] = [];
  if (!policy || !Array.isArray(policy.roots) || !Array.isArray(policy.allowedRoots)) {
    issues.push({ path: 'policy', message: 'expected { roots, allowedRoots }' });
  } else {
    issues.push(...limitIssues(policy, 'policy'));
    policy.roots.forEach((p, i) => {
      if (!isAbsolutePath(p) || p === '/')
        issues.push({ path: `policy.roots.${i}`, message: 'expected an absolute path other than /' });
    });
    policy.allowedRoots.forEach((p, i) => {
      if (!isAbsolutePath(p)) issues.push({ path: `policy.allowedRoots.${i}`, message: 'expected an absolute path' });
    });
    if (policy.tempDir !== undefined && !isAbsolutePath(policy.tempDir))
      issues.push({ path: 'policy.tempDir', message: 'expected an absolute path' });
  }
  if (!Array.isArray(argv) || argv.length === 0 || argv.some((a) => typeof a !== 'string'))
    issues.push({ path: 'argv', message: 'expected a non-empty array of strings' });
  else if (argv[0]!.includes('=')) issues.push({ path: 'argv.0', message: 'the command must not contain "="' });
  if (!isAbsolutePath(opts?.workspace) || opts.workspace === '/')
    issues.push({ path: 'workspace', message: 'expected an absolute path other than /' });
  for (const key of ['readWrite', 'readOnly', 'hide', 'privateTemp', 'devices'] as const) {
    (opts?.[key] ?? []).forEach((p, i) => {
      if (!isAbsolutePath(p)) issues.push({ path: `${key}.${i}`, message: 'expected an absolute path' });
    });
  }
  if (opts?.connectionFile !== undefined && !isAbsolutePath(opts.connectionFile))
    issues.push({ path: 'connectionFile', message: 'expected an absolute path' });
  if (issues.length > 0) throw new InvalidOptionsError(issues, { subject: 'sandbox command' });
}

/**
 * The bubblewrap arguments between `bwrap` and `--`, with the connection-file steps left to the caller
 * (`connectionOps`), so the kernelspec installer can put jupyter's `{connection_file}` there.
 */
export function bwrapArguments(
  policy: SandboxPolicy,
  opts: WrapCommandOptions,
  connectionOps: readonly string[],
): string[] {
  const privateTemp = privateTempDirs(policy, opts);
  // Parents before children: a later mount on a deeper path wins, so "most specific rule wins" whatever the mix of
  // hidden roots, allowed roots and the workspace. The sort is stable, so at equal paths hiding comes first.
  const ordered = mountOps(policy, opts)
    .map((op, i) => ({ op, i }))
    .sort((a, b) => depth(a.op.path) - depth(b.op.path) || a.i - b.i);

  const temp = privateTemp[0];
  const env: Record<string, string> = { ...(temp ? { TMPDIR: temp, TMP: temp, TEMP: temp } : {}), ...opts.setEnv };
  return [
    ...SANDBOX_NAMESPACE_ARGS,
    ...(policy.network === false ? ['--unshare-net'] : []),
    ...READ_ONLY_ROOT_ARGS,
    ...(opts.devices ?? []).flatMap((device) => ['--dev-bind', device, device]),
    ...ordered.flatMap(({ op }) => op.args),
    ...connectionOps,
    // The empty tmpfs over each hidden root goes read-only (non-recursive: binds inside keep their modes).
    ...policy.roots.flatMap((root) => ['--remount-ro', root]),
    ...(opts.unsetEnv ?? SANDBOX_UNSET_ENV).flatMap((name) => ['--unsetenv', name]),
    ...Object.entries(env).flatMap(([name, value]) => ['--setenv', name, value]),
    '--chdir',
    opts.workspace,
  ];
}

/**
 * True for a policy without hidden roots (limits only): it hides nothing the user can read (the gateway's state and
 * the kernelspecs aside), but its filesystem is read-only like any sandbox's, with the host's GPUs in its `/dev`.
 */
export function hostFilesystem(policy: ReadIsolationPolicy): boolean {
  return policy.roots.length === 0;
}

/** Every mount of a sandbox under `policy` and `opts` (the connection file's aside), in the order they are given. */
function mountOps(policy: ReadIsolationPolicy, opts: WrapCommandOptions): MountOp[] {
  const ops: MountOp[] = [];
  const tmpfs = (path: string, kind: MountKind) => ops.push({ path, kind, args: ['--tmpfs', path] });
  for (const dir of privateTempDirs(policy, opts)) tmpfs(dir, 'temp');
  for (const root of policy.roots) tmpfs(root, 'hidden');
  for (const hidden of opts.hide ?? []) tmpfs(hidden, 'hidden');
  for (const allowed of policy.allowedRoots)
    ops.push({ path: allowed, kind: 'read-only', args: ['--ro-bind', allowed, allowed] });
  for (const ro of opts.readOnly ?? []) ops.push({ path: ro, kind: 'read-only', args: ['--ro-bind', ro, ro] });
  ops.push({ path: opts.workspace, kind: 'read-write', args: ['--bind', opts.workspace, opts.workspace] });
  for (const rw of opts.readWrite ?? []) ops.push({ path: rw, kind: 'read-write', args: ['--bind', rw, rw] });
  for (const pin of pinnedDirectories(ops)) ops.push({ path: pin, kind: 'read-write', args: ['--bind', pin, pin] });
  return ops;
}

/**
 * The directories a sandbox could rename to move a mount elsewhere: those strictly between a writable bind (the
 * workspace, `readWrite`) and a hidden root, allowed root or bind below it, e.g. `ws/sub` for a hidden `ws/sub/secret`.
 * Each is bound onto itself, which changes nothing the sandbox sees but makes it a mount point there, and the kernel
 * refuses to rename or remove a mount point (EBUSY): no kernel under the policy can move a hidden root away and
 * leave a decoy for the next launch to hide.
 */
function pinnedDirectories(ops: readonly MountOp[]): string[] {
  const mounted = new Set(ops.map((op) => op.path));
  const pins = new Set<string>();
  for (const op of ops) {
    let enclosing: MountOp | undefined;
    for (const other of ops) {
      if (other.path !== op.path && isWithin(op.path, other.path)) {
        if (!enclosing || depth(other.path) > depth(enclosing.path)) enclosing = other;
      }
    }
    if (enclosing?.kind !== 'read-write') continue;
    for (let dir = dirname(op.path); dir !== enclosing.path && isWithin(dir, enclosing.path); dir = dirname(dir)) {
      if (!mounted.has(dir)) pins.add(dir);
    }
  }
  return [...pins];
}

/**
 * Every host directory a sandbox under `policy` and `opts` mounts from, onto or pins (see `pinnedDirectories`):
 * the hidden roots, `hide`, the allowed roots, `readOnly`, the workspace, `readWrite` and the pinned directories.
 * The private temporary directories are left out: they are system directories no sandbox can change.
 */
export function sandboxHostPaths(policy: ReadIsolationPolicy, opts: WrapCommandOptions): string[] {
  return [
    ...new Set(
      mountOps(policy, opts)
        .filter((op) => op.kind !== 'temp')
        .map((op) => op.path),
    ),
  ];
}

/** The private temporary directories of a command: `opts.privateTemp`, else the policy's temp dir and /tmp. */
export function privateTempDirs(policy: ReadIsolationPolicy, opts: { privateTemp?: readonly string[] }): string[] {
  const dirs = opts.privateTemp ?? [policy.tempDir ?? '/tmp', '/tmp'];
  return [...new Set(dirs)];
}

/** The bwrap steps that hide the connection file's directory and bind the file alone back read-write. */
export function connectionFileArguments(connectionFile: string): string[] {
  return ['--tmpfs', dirname(connectionFile), '--bind', connectionFile, connectionFile];
}

/**
 * The namespaces every sandbox starts with, the probe's included: its own user namespace with every capability
 * dropped (the effective, permitted, inheritable, ambient and bounding sets all empty, as root too, so nothing inside
 * can unmount or move what hides a directory, lift an rlimit or write a cgroup, nor regain a capability by executing
 * anything), it dies with its parent, and sees only its own processes and IPC.
 */
export const SANDBOX_NAMESPACE_ARGS: readonly string[] = Object.freeze([
  '--unshare-user',
  '--cap-drop',
  'ALL',
  '--die-with-parent',
  '--unshare-pid',
  '--unshare-ipc',
]);

/**
 * The filesystem of every sandbox: the host's, read-only (/sys and every cgroup hierarchy included, so a kernel cannot
 * write its own cgroup, nor anything a later launch or another kernel would run), with fresh /dev and /proc; the
 * workspace, `readWrite` and the private temp are the only places it writes.
 */
const READ_ONLY_ROOT_ARGS: readonly string[] = ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc'];

/**
 * What a read-isolation sandbox starts from: `SANDBOX_NAMESPACE_ARGS` and the whole filesystem read-only with fresh
 * /dev and /proc; mounts for the policy come after it.
 */
export const SANDBOX_BASE_ARGS: readonly string[] = Object.freeze([...SANDBOX_NAMESPACE_ARGS, ...READ_ONLY_ROOT_ARGS]);

/**
 * Refuses the resource limits a bare command line cannot carry: `memoryBytes`, `maxProcesses` and `cpuSeconds` are
 * set by the kernelspec launcher at each launch (cgroups, rlimits), which `wrapCommand()` is not.
 */
function refuseResourceLimits(policy: SandboxPolicy): void {
  for (const limit of ['memoryBytes', 'maxProcesses', 'cpuSeconds'] as const) {
    if (policy?.[limit] !== undefined) {
      throw new IsolationUnavailableError(
        `wrapCommand() cannot enforce the ${LIMIT_LABELS[limit]}: it is set up at each kernel launch by the ` +
          'kernelspec installIsolatedKernelSpec() writes; use that, or a policy without it',
        { reason: 'limit-unenforceable', limit },
      );
    }
  }
}

/**
 * Builds the command line that runs `argv` under bubblewrap with `policy` enforced: its own user namespace with no
 * capability at all (as root too), the whole filesystem read-only, an empty read-only tmpfs over each hidden root,
 * allowed roots bound back read-only, the workspace read-write (and the current directory), every directory between
 * a writable bind and a mount below it pinned (bound onto itself, so the command cannot rename it), a private tmpfs
 * over the system temporary directory and `/tmp` (and `TMPDIR`) per command, a private PID and IPC namespace (so
 * `/proc/<pid>/environ` of the gateway is out of reach), `--die-with-parent`, and gateway credentials unset.
 *
 * A policy without hidden roots hides nothing else but is as read-only (with the `devices` given bound into its
 * `/dev`); `network: false` adds a network namespace of its own (`--unshare-net`). `memoryBytes`, `maxProcesses` and
 * `cpuSeconds` are refused with `IsolationUnavailableError`: only the kernelspec launcher sets them up.
 *
 * Use it to launch any command under a policy (the kernelspec installer uses it for kernels). It is pure; check the
 * machine with `detectSandbox()` and the policy with `verifyIsolation()` first. No `--new-session`: the gateway interrupts a kernel with SIGINT to its process
 * group, so the command stays in bwrap's group; `env --ignore-signal=INT` keeps that SIGINT from killing bwrap itself,
 * and `env --default-signal=INT` restores it for the command.
 */
export function wrapCommand(policy: SandboxPolicy, argv: readonly string[], opts: WrapCommandOptions): string[] {
  checkWrapInputs(policy, argv, opts);
  refuseResourceLimits(policy);
  const envPath = opts.envPath ?? '/usr/bin/env';
  const connection = opts.connectionFile ? connectionFileArguments(opts.connectionFile) : [];
  return [
    envPath,
    '--ignore-signal=INT',
    opts.bwrapPath ?? 'bwrap',
    ...bwrapArguments(policy, opts, connection),
    '--',
    envPath,
    '--default-signal=INT',
    ...argv,
  ];
}
