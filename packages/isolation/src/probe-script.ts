// The shell script the isolation probe runs inside the sandbox, built from its plan.
import { dirname, join, relative } from 'node:path';
import type { Canary, ProbePlan } from './probe-plan.js';

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

/** The probe's script: each line tries something a hostile kernel would, and prints what it managed. */
export function probeScript(plan: ProbePlan): string {
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
