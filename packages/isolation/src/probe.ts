import { randomBytes } from 'node:crypto';
import {
  accessSync,
  constants,
  mkdtempSync,
  readdirSync,
  realpathSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, relative, sep } from 'node:path';
import {
  checkWrapInputs,
  privateTempDirs,
  type SandboxPolicy,
  type WrapCommandOptions,
  wrapCommand,
} from './bubblewrap.js';
import { IsolationUnavailableError } from './errors.js';
import { isWithin } from './paths.js';
import { canonicalTempDir } from './policy.js';
import { assertSandbox, type DetectSandboxOptions } from './sandbox.js';
import { runProcess } from './subprocess.js';

/** Options of `verifyIsolation()`: the same sandbox options the kernel will get, plus the probe's own. */
export interface VerifyIsolationOptions extends WrapCommandOptions, DetectSandboxOptions {
  /**
   * cgroup directories the kernel's limits live in (where kernels' cgroups are made): the probe must be unable to
   * make a cgroup there or move itself into one. @defaultValue []
   */
  cgroupDirs?: readonly string[];
}

/** What the probe checked; every entry passed when `verifyIsolation()` resolves. */
export interface IsolationReport {
  /** `bwrap --version` of the sandbox that was checked. */
  version: string | undefined;
  /** One line per check, e.g. `hidden /srv/data: canary unreadable`. */
  checks: string[];
}

function quote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/**
 * Calls umount2 on each target (plain, then lazily) and prints `<prefix>undo <i>` for each that came off: the system
 * call itself, since util-linux's umount declines on its own for a uid other than 0.
 */
const UMOUNT2 = [
  'import ctypes, sys',
  'libc = ctypes.CDLL(None, use_errno=True)',
  'for i, p in enumerate(sys.argv[2:]):',
  '    if libc.umount2(p.encode(), 0) == 0 or libc.umount2(p.encode(), 2) == 0:',
  '        print(sys.argv[1] + "undo", i)',
].join('\n');

/**
 * Shell lines that try to unmount each target, as a hostile kernel would: `umount` and `umount -l` where util-linux
 * is installed, and the umount2 system call where a python3 is; each success prints `<prefix>undo <i>`.
 */
function undoAttempts(targets: readonly string[], prefix: string): string[] {
  const list = targets.map(quote).join(' ');
  return [
    'if command -v umount >/dev/null 2>&1; then',
    `  echo '${prefix}umount tried'`,
    ...targets.flatMap((target, i) => [
      `  if umount ${quote(target)} 2>/dev/null; then echo '${prefix}undo ${i}'; fi`,
      `  if umount -l ${quote(target)} 2>/dev/null; then echo '${prefix}undo ${i}'; fi`,
    ]),
    'fi',
    'if command -v python3 >/dev/null 2>&1; then',
    `  echo '${prefix}umount2 tried'`,
    `  python3 -c ${quote(UMOUNT2)} ${quote(prefix)} ${list} 2>/dev/null`,
    'fi',
  ];
}

/**
 * The probe's part run in a user namespace made inside the sandbox (`unshare --user --mount --keep-caps`), where it
 * holds every capability over a copy of the sandbox's mounts: the kernel locks those mounts together, so it must
 * neither unmount one nor bind a hidden root's parent somewhere (without what covers the root) and read through it.
 */
function nestedScript(
  targets: readonly string[],
  canaries: readonly Canary[],
  hostTemp: string | undefined,
  temp: string,
): string {
  const lines = [...undoAttempts(targets, 'nested ')];
  canaries.forEach((c, i) => {
    if (!c.file) return;
    lines.push(`if cat ${quote(c.file)} >/dev/null 2>&1; then echo 'nested root ${i} LEAK'; fi`);
    const view = join(temp, `.kernelwarden-nested-${i}`);
    const through = join(view, relative(dirname(c.root), c.file));
    lines.push(
      `mkdir -p ${quote(view)} 2>/dev/null && mount --bind ${quote(dirname(c.root))} ${quote(view)} 2>/dev/null && ` +
        `if cat ${quote(through)} >/dev/null 2>&1; then echo 'nested bind ${i} LEAK'; fi`,
    );
  });
  if (hostTemp) lines.push(`if [ -e ${quote(hostTemp)} ]; then echo 'nested temp SHARED'; fi`);
  lines.push(`echo 'nested done'`);
  return lines.join('\n');
}

interface Canary {
  root: string;
  file: string | undefined;
  planted: boolean;
  link: string | undefined;
}

/** Names a listing of `root` may show inside the sandbox: the first step towards anything bound back below it. */
function expectedNames(root: string, binds: readonly string[]): Set<string> {
  const names = new Set<string>();
  for (const bind of binds) {
    if (bind !== root && isWithin(bind, root)) {
      const first = relative(root, bind).split(sep)[0];
      if (first) names.add(first);
    }
  }
  return names;
}

/**
 * The self-test: runs a probe process under `policy` exactly as a kernel would be wrapped, and resolves only if it
 * could not read a canary in any hidden root (directly, nor through a symbolic link planted in a probe directory),
 * listed nothing there but the way to what is bound back, could read every allowed root, could write in the
 * workspace but not the host's filesystem outside it (the user's home directory, unless a bind covers it), and did
 * not see the host's temporary directory (when it gets a private one). With `network: false` it
 * must have no network interface but loopback; with `cgroupDirs` it must be unable to write them. Otherwise it throws
 * `IsolationUnavailableError` (`reason: 'probe-failed'`, or the sandbox's own reason). Resource limits
 * (`memoryBytes`, `maxProcesses`, `cpuSeconds`) are not applied to the probe: they are set up at each launch.
 *
 * Use it before the first launch under a policy; `installIsolatedKernelSpec()` runs it for you. It writes a canary
 * file in each writable hidden root, one in the system temporary directory and a probe directory there, and removes
 * them all before it settles.
 */
export async function verifyIsolation(
  fullPolicy: SandboxPolicy,
  opts: VerifyIsolationOptions,
): Promise<IsolationReport> {
  checkWrapInputs(fullPolicy, ['/bin/sh'], opts);
  const policy = probedPolicy(fullPolicy);
  const sandbox = await assertSandbox(opts);
  const tempDir = policy.tempDir ?? canonicalTempDir();
  const token = randomBytes(6).toString('hex');
  const probeDir = mkdtempSync(join(tempDir, 'kernelwarden-probe-'));
  const hostTemp = join(tempDir, `kernelwarden-probe-host-${token}`);
  const canaries: Canary[] = [];
  try {
    writeFileSync(hostTemp, 'host temporary file\n', { mode: 0o600 });
    plantCanaries(policy.roots, probeDir, token, canaries);
    const plan = probePlan({ policy, opts, token, tempDir, probeDir, hostTemp, canaries });
    const out = await runProbe(plan, sandbox);
    const verdict = judgeProbe(plan, out);
    if (verdict.failures.length > 0) {
      throw new IsolationUnavailableError(
        `The isolation probe failed, so no kernel is started under this policy: ${verdict.failures.join('; ')}`,
        { reason: 'probe-failed' },
      );
    }
    return { version: sandbox.version, checks: verdict.checks };
  } finally {
    removeCanaries(canaries);
    rmSync(hostTemp, { force: true });
    rmSync(probeDir, { recursive: true, force: true });
  }
}

/** The part of a policy the probe runs under: its mounts and network, without resource limits. */
function probedPolicy(fullPolicy: SandboxPolicy): SandboxPolicy {
  return {
    roots: fullPolicy.roots,
    allowedRoots: fullPolicy.allowedRoots,
    ...(fullPolicy.tempDir !== undefined ? { tempDir: fullPolicy.tempDir } : {}),
    ...(fullPolicy.network === false ? { network: false } : {}),
  };
}

/**
 * A canary in each hidden root: a file the probe writes there, or one already there when the root is not writable,
 * and a symbolic link to it in the probe directory (which the sandbox can read); each goes into `into` as soon as it
 * is planted, so that it is removed whatever happens next.
 */
function plantCanaries(roots: readonly string[], probeDir: string, token: string, into: Canary[]): void {
  for (const [i, root] of roots.entries()) {
    const canary: Canary = { root, file: undefined, planted: false, link: undefined };
    const planted = join(root, `.kernelwarden-canary-${token}`);
    try {
      writeFileSync(planted, 'canary\n', { flag: 'wx', mode: 0o600 });
      canary.file = planted;
      canary.planted = true;
    } catch {
      // A root we cannot write in: test against something already there, if anything.
      const existing = readdirSync(root, { withFileTypes: true }).find((e) => e.isFile());
      if (existing) canary.file = join(root, existing.name);
    }
    if (canary.file) {
      canary.link = join(probeDir, `link-${i}`);
      symlinkSync(canary.file, canary.link);
    }
    into.push(canary);
  }
}

/** Removes the canaries the probe wrote (not the files it borrowed). */
function removeCanaries(canaries: readonly Canary[]): void {
  for (const c of canaries) {
    if (c.planted && c.file) {
      try {
        unlinkSync(c.file);
      } catch {
        // already gone
      }
    }
  }
}

/** Everything one probe run checks, worked out before it runs. */
interface ProbePlan {
  policy: SandboxPolicy;
  opts: VerifyIsolationOptions;
  token: string;
  /** The host's temporary directory. */
  tempDir: string;
  probeDir: string;
  /** A file in the host's temporary directory, which a private temporary directory must hide. */
  hostTemp: string;
  canaries: readonly Canary[];
  /** What is bound back into the sandbox: the way to each may show when a hidden root is listed. */
  binds: readonly string[];
  /** A file the probe must be able to write in the workspace. */
  writeProbe: string;
  privateTemp: readonly string[];
  /** The sandbox's temporary directory. */
  temp: string;
  /** The mounts the probe tries to undo. */
  undoTargets: readonly string[];
  hostProbe: { dir: string; file: string } | undefined;
  cgroupDirs: readonly string[];
}

function probePlan(parts: {
  policy: SandboxPolicy;
  opts: VerifyIsolationOptions;
  token: string;
  tempDir: string;
  probeDir: string;
  hostTemp: string;
  canaries: readonly Canary[];
}): ProbePlan {
  const { policy, opts, token, probeDir } = parts;
  const privateTemp = privateTempDirs(policy, opts);
  return {
    ...parts,
    binds: [...policy.allowedRoots, opts.workspace, ...(opts.readWrite ?? []), ...(opts.readOnly ?? []), probeDir],
    writeProbe: join(opts.workspace, `.kernelwarden-probe-${token}`),
    privateTemp,
    temp: privateTemp[0] ?? '/tmp',
    undoTargets: [...policy.roots, ...(opts.hide ?? []), ...privateTemp],
    hostProbe: hostWriteProbe(policy, opts, privateTemp, token),
    cgroupDirs: opts.cgroupDirs ?? [],
  };
}

/**
 * Runs the probe's script under the plan's policy exactly as a kernel would be wrapped, and returns its output lines;
 * throws `IsolationUnavailableError` when it could not run to its end.
 */
async function runProbe(plan: ProbePlan, sandbox: { bwrapPath: string; envPath: string }): Promise<string[]> {
  const { cgroupDirs: _cgroupDirs, ...wrapOptions } = plan.opts;
  const argv = wrapCommand(plan.policy, ['/bin/sh', '-c', probeScript(plan)], {
    ...wrapOptions,
    bwrapPath: sandbox.bwrapPath,
    envPath: sandbox.envPath,
    readOnly: [...(plan.opts.readOnly ?? []), plan.probeDir],
  });
  const result = await runProcess(argv, {
    signal: plan.opts.signal,
    timeoutMs: plan.opts.timeoutMs ?? 10_000,
    timeoutMessage: 'The isolation probe did not finish in time',
  });
  const out = result.stdout.split('\n').filter(Boolean);
  if (result.code !== 0 || !out.includes('probe done')) {
    throw new IsolationUnavailableError(
      `The isolation probe could not run under bubblewrap (exit ${result.code ?? result.signal}): ` +
        result.stderr.trim().split('\n').slice(-3).join(' / '),
      { reason: 'probe-failed' },
    );
  }
  return out;
}

/** The probe's script: each line tries something a hostile kernel would, and prints what it managed. */
function probeScript(plan: ProbePlan): string {
  return [
    ...escapeLines(plan),
    ...readLines(plan),
    ...writeLines(plan),
    ...containmentLines(plan),
    `echo 'probe done'`,
  ].join('\n');
}

/** Capabilities held, and attempts to undo the mounts, from the sandbox and from a user namespace inside it. */
function escapeLines(plan: ProbePlan): string[] {
  const { canaries, privateTemp, hostTemp, temp, undoTargets } = plan;
  const nested = nestedScript(undoTargets, canaries, privateTemp.length > 0 ? hostTemp : undefined, temp);
  return [
    // What the sandbox holds: every capability set must be empty, the bounding set included.
    `while read -r k v; do case $k in Cap*) echo "cap $k $v";; esac; done < /proc/self/status`,
    // Try to undo the mounts, as a hostile kernel would; the reads below then show whether anything came back.
    ...undoAttempts(undoTargets, ''),
    // The same from a user namespace of its own (where a process holds every capability over a copy of the mounts).
    'if command -v unshare >/dev/null 2>&1; then',
    `  unshare --user --mount --keep-caps /bin/sh -c ${quote(nested)} 2>/dev/null`,
    'fi',
  ];
}

/** Reads of each hidden root's canary (directly and through its link) and listing, and of each allowed root. */
function readLines(plan: ProbePlan): string[] {
  const lines: string[] = [];
  plan.canaries.forEach((c, i) => {
    if (c.file) lines.push(`if cat ${quote(c.file)} >/dev/null 2>&1; then echo 'root ${i} direct LEAK'; fi`);
    if (c.link) lines.push(`if cat ${quote(c.link)} >/dev/null 2>&1; then echo 'root ${i} link LEAK'; fi`);
    lines.push(`for n in $(ls -A ${quote(c.root)} 2>/dev/null); do echo "list ${i} $n"; done`);
  });
  plan.policy.allowedRoots.forEach((a, i) => {
    lines.push(`if ls ${quote(a)} >/dev/null 2>&1; then :; else echo 'allowed ${i} UNREADABLE'; fi`);
  });
  return lines;
}

/** Writes to the workspace (must work), to the host outside it (must not), and to the private temporary directory. */
function writeLines(plan: ProbePlan): string[] {
  const { writeProbe, hostProbe, privateTemp, hostTemp, temp } = plan;
  const lines = [
    `if (: > ${quote(writeProbe)}) 2>/dev/null; then rm -f ${quote(writeProbe)}; else echo 'workspace UNWRITABLE'; fi`,
  ];
  if (hostProbe) {
    lines.push(
      `if (: > ${quote(hostProbe.file)}) 2>/dev/null; then rm -f ${quote(hostProbe.file)}; echo 'host WRITABLE'; fi`,
    );
  }
  if (privateTemp.length > 0) {
    lines.push(`if [ -e ${quote(hostTemp)} ]; then echo 'temp SHARED'; fi`);
    lines.push(
      `if (: > ${quote(join(temp, '.kernelwarden-probe'))}) 2>/dev/null; then :; else echo 'temp UNWRITABLE'; fi`,
    );
  }
  return lines;
}

/** Listings of the hidden directories, the network interfaces (`network: false`), and writes to the cgroups. */
function containmentLines(plan: ProbePlan): string[] {
  const lines: string[] = [];
  (plan.opts.hide ?? []).forEach((hidden, i) => {
    lines.push(`for n in $(ls -A ${quote(hidden)} 2>/dev/null); do echo "hidden ${i} $n"; done`);
  });
  if (plan.policy.network === false) {
    // /proc/net/dev lists the interfaces of the sandbox's network namespace: only loopback may be there.
    lines.push(`tail -n +3 /proc/net/dev 2>/dev/null | while IFS=: read -r n rest; do echo "netif $(echo $n)"; done`);
  }
  plan.cgroupDirs.forEach((dir, i) => {
    const escapee = join(dir, `kw-escape-${plan.token}`);
    lines.push(
      `if mkdir ${quote(escapee)} 2>/dev/null; then echo 'cgroup ${i} WRITABLE'; rmdir ${quote(escapee)}; fi`,
      `if (echo $$ > ${quote(join(dir, 'cgroup.procs'))}) 2>/dev/null; then echo 'cgroup ${i} JOINED'; fi`,
    );
  });
  return lines;
}

/** What the probe's output says: every check made, and every one that failed. */
interface Verdict {
  checks: string[];
  failures: string[];
}

/** Judges the probe's output lines against its plan, in the order of the script. */
function judgeProbe(plan: ProbePlan, out: readonly string[]): Verdict {
  const verdict: Verdict = { checks: [], failures: [] };
  judgeEscapes(plan, out, verdict);
  judgeReads(plan, out, verdict);
  judgeWrites(plan, out, verdict);
  judgeContainment(plan, out, verdict);
  return verdict;
}

/** Capabilities, and whether a mount came off (from the sandbox or a user namespace inside it). */
function judgeEscapes(plan: ProbePlan, out: readonly string[], { checks, failures }: Verdict): void {
  const caps = out.filter((l) => l.startsWith('cap ')).map((l) => l.slice(4).split(/\s+/));
  const held = caps.filter(([, value]) => !/^0+$/.test(value ?? ''));
  if (caps.length < 5) failures.push('the sandbox could not tell which capabilities it holds');
  else if (held.length > 0)
    failures.push(
      `the sandbox holds capabilities (${held.map(([k, v]) => `${k?.replace(/:$/, '')} ${v}`).join(', ')})`,
    );
  checks.push('capabilities: none (effective, permitted, inheritable, ambient, bounding)');
  plan.undoTargets.forEach((target, i) => {
    if (out.includes(`undo ${i}`)) failures.push(`the sandbox could unmount ${target}`);
    if (out.includes(`nested undo ${i}`)) failures.push(`a user namespace inside the sandbox could unmount ${target}`);
  });
  plan.canaries.forEach((c, i) => {
    if (out.includes(`nested root ${i} LEAK`) || out.includes(`nested bind ${i} LEAK`))
      failures.push(`a file in hidden root ${c.root} was readable from a user namespace inside the sandbox`);
  });
  if (out.includes('nested temp SHARED'))
    failures.push(
      `the system temporary directory ${plan.tempDir} was visible from a user namespace inside the sandbox`,
    );
  const tried = [out.includes('umount tried') && 'umount', out.includes('umount2 tried') && 'umount2'].filter(Boolean);
  checks.push(
    tried.length > 0
      ? `unmounting: refused (${tried.join(', ')})`
      : 'unmounting: not tried (neither umount nor python3 here)',
    out.includes('nested done')
      ? 'a user namespace inside: could not undo the mounts'
      : 'a user namespace inside: could not be made',
  );
}

/** Hidden roots' canaries and listings, allowed roots' reads. */
function judgeReads(plan: ProbePlan, out: readonly string[], { checks, failures }: Verdict): void {
  plan.canaries.forEach((c, i) => {
    if (out.includes(`root ${i} direct LEAK`)) failures.push(`a file in hidden root ${c.root} was readable`);
    if (out.includes(`root ${i} link LEAK`))
      failures.push(`a file in hidden root ${c.root} was readable through a symbolic link`);
    const extra = unexpectedNames(out, `list ${i} `, c.root, plan.binds);
    if (extra.length > 0) failures.push(`hidden root ${c.root} listed ${extra.slice(0, 3).join(', ')}`);
    checks.push(`hidden ${c.root}: ${c.file ? 'canary unreadable directly and through a link' : 'listing empty'}`);
  });
  plan.policy.allowedRoots.forEach((a, i) => {
    if (out.includes(`allowed ${i} UNREADABLE`)) failures.push(`allowed root ${a} was not readable`);
    checks.push(`allowed ${a}: readable`);
  });
}

/** The workspace, the temporary directories and the host outside the workspace. */
function judgeWrites(plan: ProbePlan, out: readonly string[], { checks, failures }: Verdict): void {
  const { opts, tempDir, temp, hostProbe, privateTemp } = plan;
  if (out.includes('workspace UNWRITABLE')) failures.push(`the workspace ${opts.workspace} was not writable`);
  if (out.includes('temp SHARED')) failures.push(`the system temporary directory ${tempDir} was visible`);
  if (out.includes('temp UNWRITABLE')) failures.push(`the private temporary directory ${temp} was not writable`);
  checks.push(`workspace ${opts.workspace}: writable`);
  if (hostProbe) {
    if (out.includes('host WRITABLE'))
      failures.push(`the sandbox could write ${hostProbe.dir}, outside its workspace and private temp`);
    checks.push(`host ${hostProbe.dir}: read-only`);
  }
  if (privateTemp.length > 0) checks.push(`${temp}: private`);
}

/** Hidden directories' listings, the network interfaces, the cgroups. */
function judgeContainment(plan: ProbePlan, out: readonly string[], { checks, failures }: Verdict): void {
  (plan.opts.hide ?? []).forEach((hidden, i) => {
    const extra = unexpectedNames(out, `hidden ${i} `, hidden, plan.binds);
    if (extra.length > 0) failures.push(`hidden directory ${hidden} listed ${extra.slice(0, 3).join(', ')}`);
    checks.push(`hidden ${hidden}: listing empty`);
  });
  if (plan.policy.network === false) {
    const interfaces = out.filter((l) => l.startsWith('netif ')).map((l) => l.slice('netif '.length));
    const others = interfaces.filter((n) => n !== 'lo');
    if (!interfaces.includes('lo') && others.length === 0)
      failures.push('the sandbox could not tell its network interfaces');
    else if (others.length > 0) failures.push(`the sandbox has network interfaces (${others.join(', ')})`);
    checks.push('network: loopback only');
  }
  plan.cgroupDirs.forEach((dir, i) => {
    if (out.includes(`cgroup ${i} WRITABLE`)) failures.push(`the sandbox could make a cgroup in ${dir}`);
    if (out.includes(`cgroup ${i} JOINED`)) failures.push(`the sandbox could move itself into the cgroup ${dir}`);
    checks.push(`cgroup ${dir}: not writable`);
  });
}

/** The names the probe listed under `prefix` for directory `root` that are not the way to something bound back. */
function unexpectedNames(out: readonly string[], prefix: string, root: string, binds: readonly string[]): string[] {
  const allowedNames = expectedNames(root, binds);
  return out
    .filter((l) => l.startsWith(prefix))
    .map((l) => l.slice(prefix.length))
    .filter((n) => !allowedNames.has(n));
}

/**
 * Where the probe tries to write the host outside every writable bind: this user's home directory, when it exists,
 * the user can write it, and no bind or mount of the sandbox covers it (undefined otherwise).
 */
function hostWriteProbe(
  policy: SandboxPolicy,
  opts: VerifyIsolationOptions,
  privateTemp: readonly string[],
  token: string,
): { dir: string; file: string } | undefined {
  let dir: string;
  try {
    dir = realpathSync(homedir());
    accessSync(dir, constants.W_OK);
  } catch {
    return undefined;
  }
  const covering = [opts.workspace, ...(opts.readWrite ?? []), ...privateTemp, ...policy.roots, ...(opts.hide ?? [])];
  if (covering.some((mounted) => isWithin(dir, mounted))) return undefined;
  return { dir, file: join(dir, `.kernelwarden-probe-host-${token}`) };
}
