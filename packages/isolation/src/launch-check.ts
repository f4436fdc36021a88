import { type BigIntStats, lstatSync } from 'node:fs';
import { dirname } from 'node:path';
import { IsolationPolicyError } from './errors.js';

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
 * the connection file, the `stat` to use, the recorded paths and their identities (one per line), then the wrapped
 * command. It stats every recorded path in one go and compares with the record; on any difference it names the first
 * path that changed on stderr (one line, which reaches the user as the kernel's start error) and exits 1 without
 * starting bwrap. Then the marker in the command becomes `--tmpfs <runtime dir> --bind <file> <file>` (known only at
 * launch), plus, when the gateway names the kernel's own ipc socket directory, a tmpfs over the
 * directory of every kernel's sockets and a bind of this one's
 * (`KERNELWARDEN_KERNEL_IPC_DIR`), and the command is exec'd. No `{name}` anywhere: jupyter rewrites those in every
 * argv element.
 */
export const LAUNCH_SCRIPT = [
  'cf=$1; st=$2; paths=$3; want=$4; shift 4',
  "nl='",
  "'",
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
  'rt=$(dirname -- "$cf")',
  'for a do',
  '  shift',
  `  if [ "$a" = '${CONNECTION_MARK}' ]; then`,
  '    set -- "$@" --tmpfs "$rt" --bind "$cf" "$cf"',
  // LocalGateway's kernels talk ZMQ over Unix sockets in a directory of their own: hide every other kernel's
  // (wherever the ipc base lies) and bind just this one back.
  '    ipc=$KERNELWARDEN_KERNEL_IPC_DIR',
  '    if [ -n "$ipc" ] && [ -d "$ipc" ]; then',
  '      set -- "$@" --tmpfs "$(dirname -- "$ipc")" --bind "$ipc" "$ipc"',
  '    fi',
  '  else set -- "$@" "$a"; fi',
  'done',
  'exec "$@"',
].join('\n');

/** The launcher's arguments between the connection file and the wrapped command. */
export function launchCheckArguments(statPath: string, record: PathRecord): string[] {
  return [statPath, record.paths.join('\n'), record.ids.join('\n')];
}
