import { type BigIntStats, lstatSync } from 'node:fs';
import { dirname } from 'node:path';
import { InvalidOptionsError } from '@kernelwarden/core';
import { IsolationPolicyError } from './errors.js';
import type { CgroupLimit } from './limit-support.js';
import { LIMIT_LABELS } from './limits.js';

/** What a kernel launch compares the disk against: each directory and its `device:inode` when the policy was checked. */
export interface PathRecord {
  /** Canonical absolute paths, every ancestor (but `/`) of each sandbox path included, sorted. */
  readonly paths: readonly string[];
  /** `<st_dev>:<st_ino>` of each path, as `stat -c %d:%i` prints it. */
  readonly ids: readonly string[];
}

/** Jupyter replaces `{name}` in every argv element of a kernelspec; a path holding one would be rewritten. */
const JUPYTER_PLACEHOLDER = /\{[A-Za-z0-9_]+\}/;

/**
 * Refuses a path the kernelspec cannot carry unchanged: a line break (the launch check lists paths one per line), or
 * a `{name}` jupyter would rewrite (a hidden `/data/{prefix}` would hide `/data/usr`).
 */
export function checkKernelSpecPath(path: string): void {
  if (path.includes('\n')) {
    throw new IsolationPolicyError(`${JSON.stringify(path)} contains a line break: it cannot be isolated`, { path });
  }
  if (JUPYTER_PLACEHOLDER.test(path)) {
    throw new IsolationPolicyError(
      `${path} contains a {name} that jupyter would rewrite in the kernel's command line: it cannot be isolated`,
      { path },
    );
  }
}

/**
 * Records the identity (`device:inode`) of every directory a sandbox mounts, and of every ancestor of each, so a
 * later launch can tell that none was moved, replaced, swapped for a symbolic link or removed. Throws
 * `IsolationPolicyError` for a path that is missing or passes through a symbolic link.
 *
 * Record after the probe: the probe writes in the hidden roots and the workspace, and on some filesystems (overlayfs
 * copy-up) a directory's identity settles on the first write.
 */
export function recordPaths(sandboxPaths: readonly string[]): PathRecord {
  const all = new Set<string>();
  for (const path of sandboxPaths) {
    checkKernelSpecPath(path);
    for (let p = path; p !== dirname(p); p = dirname(p)) all.add(p);
  }
  const paths = [...all].sort();
  const ids = paths.map((path) => {
    let stat: BigIntStats;
    try {
      stat = lstatSync(path, { bigint: true });
    } catch (cause) {
      throw new IsolationPolicyError(`${path} does not exist: a sandbox under this policy would mount it`, {
        path,
        cause,
      });
    }
    if (stat.isSymbolicLink()) {
      throw new IsolationPolicyError(`${path} is a symbolic link: give the directory it points to`, { path });
    }
    return `${stat.dev}:${stat.ino}`;
  });
  return { paths, ids };
}

/** Marker replaced at launch by the steps that hide the runtime directory and bind the connection file. */
export const CONNECTION_MARK = '@kernelwarden-connection-file@';

/**
 * The kernelspec's launcher, POSIX sh, run by jupyter at every launch of the kernel (restarts included). Arguments:
 * the connection file, the `stat` to use, the recorded paths and their identities (one per line), the kernel
 * cgroups' tag, the file a process reads its own cgroups from (`/proc/self/cgroup`), the cgroup limits (one line per
 * controller, see `cgroupLaunchArguments()`), then the wrapped command.
 *
 * 1. It stats every recorded path in one go and compares with the record; on any difference it names the first path
 *    that changed on stderr (one line, which reaches the user as the kernel's start error) and exits 1 without
 *    starting bwrap.
 * 2. With cgroup limits, for each controller it finds its own cgroup (the gateway's: jupyter is its parent), removes
 *    the empty cgroups of this kernelspec whose kernel the gateway no longer knows (no connection file), makes
 *    `<base>/kw-<tag>-<kernel id>/kernel` (kept across restarts of the same kernel, so its counters add up), writes
 *    the limits into `kw-<tag>-<kernel id>` and moves itself into `kernel` — the sandbox and the kernel are exec'd
 *    from this very process, so everything they start is inside. Any step that fails names the limit on stderr and
 *    exits 1: the kernel never runs without its limits.
 * 3. The marker in the command becomes `--tmpfs <runtime dir> --bind <file> <file>` (known only at launch), plus,
 *    when the gateway names the kernel's own ipc socket directory, a tmpfs over the directory of every kernel's
 *    sockets and a bind of this one's (`KERNELWARDEN_KERNEL_IPC_DIR`), and the command is exec'd.
 *
 * No `{name}` anywhere: jupyter rewrites those in every argv element.
 */
export const LAUNCH_SCRIPT = [
  'cf=$1; st=$2; paths=$3; want=$4; tag=$5; cgf=$6; cgs=$7; shift 7',
  "nl='",
  "'",
  "tab='\t'",
  'set -f; IFS=$nl',
  'got=$(LC_ALL=C "$st" -c %d:%i -- $paths 2>/dev/null)',
  'if [ "$got" != "$want" ]; then',
  '  rest=$want$nl',
  '  for p in $paths; do',
  `    w=\${rest%%"$nl"*}; rest=\${rest#*"$nl"}`,
  '    g=$(LC_ALL=C "$st" -c %d:%i -- "$p" 2>/dev/null) || g=',
  '    if [ "$g" != "$w" ]; then',
  "      if [ -z \"$g\" ]; then why='is gone'; else why='is no longer the same directory (moved, replaced or a symbolic link)'; fi",
  '      printf \'kernelwarden: the isolated kernel was not started: %s %s since its read-isolation policy was checked; start a new session to check the policy again\\n\' "$p" "$why" >&2',
  '      exit 1',
  '    fi',
  '  done',
  "  printf 'kernelwarden: the isolated kernel was not started: the directories of its read-isolation policy could not be checked\\n' >&2",
  '  exit 1',
  'fi',
  'unset IFS; set +f',
  // The directory by expansion, not dirname(1): every program the launcher runs delays the kernel by milliseconds.
  `rt=\${cf%/*}; [ -n "$rt" ] || rt=/`,
  'if [ -n "$cgs" ]; then',
  '  kw_fail() { printf \'kernelwarden: the kernel was not started: its %s could not be set up: %s\\n\' "$1" "$2" >&2; exit 1; }',
  // One controller's line: label, mount point, mount root, key ('-' for v2), up, then file=value settings. Sets kb
  // to the directory this kernel's cgroup goes in.
  '  kw_base() {',
  '    kl=$1; km=$2; kr=$3; kk=$4; ku=$5; kp=; kf=',
  '    while IFS= read -r l; do',
  `      c=\${l#*:}; p=\${c#*:}; c=\${c%%:*}`,
  '      if [ "$kk" = - ]; then',
  `        if [ "\${l%%:*}" = 0 ] && [ -z "$c" ]; then kp=$p; kf=1; break; fi`,
  '      else',
  '        case ,$c, in *,"$kk",*) kp=$p; kf=1; break;; esac',
  '      fi',
  '    done < "$cgf"',
  '    [ -n "$kf" ] || kw_fail "$kl" "this process is in no cgroup of that controller ($cgf)"',
  '    if [ "$kr" != / ]; then',
  `      case $kp in "$kr"|"$kr"/*) kp=\${kp#"$kr"};; *) kw_fail "$kl" "its cgroup $kp is not under the mount $km";; esac`,
  '    fi',
  `    if [ "$ku" = 1 ]; then kp=\${kp%/*}; fi`,
  `    kb=\${km%/}\${kp%/}`,
  '  }',
  '  kw_set() {',
  '    kw_base "$@"; shift 5',
  '    kd=$kb/$kn',
  '    [ -d "$kd/kernel" ] || kw_fail "$kl" "cannot create the cgroup $kd"',
  '    for s do',
  `      printf '%s\\n' "\${s#*=}" 2>/dev/null > "$kd/\${s%%=*}" || kw_fail "$kl" "cannot write \${s#*=} to $kd/\${s%%=*}"`,
  '    done',
  '    printf \'%s\\n\' $$ 2>/dev/null > "$kd/kernel/cgroup.procs" || kw_fail "$kl" "cannot move the kernel into $kd/kernel"',
  '  }',
  `  id=\${cf##*/}; id=\${id#kernel-}; id=\${id%.json}`,
  "  case $id in ''|*[!A-Za-z0-9-]*) id=p$$;; esac",
  '  kn=kw-$tag-$id; kdirs=; kgone=',
  '  set -f; IFS=$nl',
  '  for rec in $cgs; do',
  '    IFS=$tab; kw_base $rec; IFS=$nl; set +f',
  '    for d in "$kb"/kw-"$tag"-*; do',
  '      [ -d "$d" ] || continue',
  `      i=\${d##*/kw-"$tag"-}`,
  '      if [ "$i" = "$id" ] || [ -e "$rt/kernel-$i.json" ]; then continue; fi',
  '      if read -r x 2>/dev/null < "$d/kernel/cgroup.procs"; then continue; fi',
  '      kgone=$kgone$nl$d/kernel$nl$d',
  '    done',
  '    set -f; kdirs=$kdirs$nl$kb/$kn$nl$kb/$kn/kernel',
  '  done',
  // One rmdir and one mkdir for every controller together: each program run costs milliseconds.
  '  if [ -n "$kgone" ]; then rmdir $kgone 2>/dev/null; fi',
  // Not -p: a base that is not there must not be made (it would be a cgroup in the wrong place); a restart finds
  // both already there.
  '  mkdir $kdirs 2>/dev/null',
  '  for rec in $cgs; do IFS=$tab; kw_set $rec; IFS=$nl; done',
  '  unset IFS; set +f',
  'fi',
  'for a do',
  '  shift',
  `  if [ "$a" = '${CONNECTION_MARK}' ]; then`,
  '    set -- "$@" --tmpfs "$rt" --bind "$cf" "$cf"',
  // LocalGateway's kernels talk ZMQ over Unix sockets in a directory of their own: hide every other kernel's
  // (wherever the ipc base lies) and bind just this one back.
  '    ipc=$KERNELWARDEN_KERNEL_IPC_DIR',
  '    if [ -n "$ipc" ] && [ -d "$ipc" ]; then',
  `      ipb=\${ipc%/*}; [ -n "$ipb" ] || ipb=/`,
  '      set -- "$@" --tmpfs "$ipb" --bind "$ipc" "$ipc"',
  '    fi',
  '  else set -- "$@" "$a"; fi',
  'done',
  'exec "$@"',
].join('\n');

/** The cgroup part of a launch: the kernelspec's tag and the controllers to make a kernel's cgroup in. */
export interface LaunchCgroups {
  /** 16 hex: the kernels' cgroups of one kernelspec are `kw-<tag>-<kernel id>`. */
  tag: string;
  /** One per controller (`planLimits()`'s `cgroups`). */
  limits: readonly CgroupLimit[];
  /** Where the launcher reads its own cgroups (tests stage one). @defaultValue '/proc/self/cgroup' */
  cgroupFile?: string;
}

/**
 * The launcher's arguments between the connection file and the wrapped command: the `stat` to use, the record, and
 * the cgroup limits, one line per controller: label, mount point, mount root, key (`-` for v2), up, then
 * `<file>=<value>` settings, tab-separated.
 */
export function launchCheckArguments(
  statPath: string,
  record: PathRecord,
  cgroups: LaunchCgroups = { tag: '', limits: [] },
): string[] {
  if (cgroups.limits.length > 0 && !/^[0-9a-f]{16}$/.test(cgroups.tag)) {
    throw new InvalidOptionsError([{ path: 'cgroups.tag', message: 'expected 16 hex digits' }], {
      subject: 'kernel launcher',
    });
  }
  const lines = cgroups.limits.map(({ controller: c, limit, settings }) => {
    const fields = [
      LIMIT_LABELS[limit],
      c.mount,
      c.mountRoot,
      c.key || '-',
      String(c.up),
      ...settings.map(([file, value]) => `${file}=${value}`),
    ];
    for (const field of fields) {
      checkKernelSpecPath(field);
      if (field.includes('\t') || field === '') {
        throw new IsolationPolicyError(`${JSON.stringify(field)} cannot be passed to the kernel launcher`, {
          path: field,
        });
      }
    }
    return fields.join('\t');
  });
  return [
    statPath,
    record.paths.join('\n'),
    record.ids.join('\n'),
    cgroups.limits.length > 0 ? cgroups.tag : '',
    cgroups.cgroupFile ?? '/proc/self/cgroup',
    lines.join('\n'),
  ];
}
