import { randomBytes } from 'node:crypto';
import { accessSync, constants, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The cgroup controllers kernel limits use: `memory` for `memoryBytes`, `pids` for `maxProcesses`. */
export type CgroupControllerName = 'memory' | 'pids';

/**
 * A cgroup controller kernels' cgroups can be made in: where its hierarchy is mounted, how a process finds its own
 * cgroup there, and the directory a kernel's cgroup goes in (`base`).
 */
export interface CgroupController {
  /** Which controller. */
  readonly controller: CgroupControllerName;
  /** cgroup v1 (one hierarchy per controller) or v2 (the unified hierarchy). */
  readonly version: 1 | 2;
  /** Where the hierarchy is mounted, e.g. `/sys/fs/cgroup/memory` or `/sys/fs/cgroup`. */
  readonly mount: string;
  /** The cgroup the mount shows at its top (`/` unless only a subtree is mounted). */
  readonly mountRoot: string;
  /** v1: the controller's name in `/proc/<pid>/cgroup`; v2: `''` (the `0::` line). */
  readonly key: string;
  /**
   * 0: kernels' cgroups are made inside the launching process's own cgroup (v1, or the v2 root); 1: beside it, in
   * its parent (v2, whose "no internal processes" rule keeps a cgroup with processes from delegating controllers).
   */
  readonly up: 0 | 1;
  /** The directory kernels' cgroups are made in, for the process `detectCgroups()` looked at. */
  readonly base: string;
  /** The control files a cgroup made there has (e.g. `memory.memsw.limit_in_bytes` when swap is accounted). */
  readonly files: readonly string[];
}

/** What `detectCgroups()` found: the usable controllers, and for each missing one why. */
export interface CgroupDetection {
  /** Controllers a kernel's cgroup can be made in and limited by. */
  readonly controllers: readonly CgroupController[];
  /** Why a controller cannot be used, e.g. `memory: cannot create a cgroup in /sys/fs/cgroup/memory/x (EACCES)`. */
  readonly problems: Readonly<Partial<Record<CgroupControllerName, string>>>;
}

/** The sub-cgroup of a kernel's cgroup its processes run in; the limits are set on the cgroup above it. */
export const KERNEL_CGROUP_LEAF = 'kernel';

/** A kernel's cgroup: `kw-<16 hex of its kernelspec>-<kernel id>`. */
const KERNEL_CGROUP = /^kw-([0-9a-f]{16})-([A-Za-z0-9-]+)$/;

/** The name of the cgroup of kernel `kernelId` launched from the kernelspec whose hash is `tag`. */
export function kernelCgroupName(tag: string, kernelId: string): string {
  return `kw-${tag}-${kernelId}`;
}

interface MountEntry {
  root: string;
  point: string;
  fstype: string;
  superOptions: string[];
}

function unescapeMount(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));
}

/** The cgroup mounts of `/proc/<pid>/mountinfo`. */
export function parseMountInfo(text: string): MountEntry[] {
  const mounts: MountEntry[] = [];
  for (const line of text.split('\n')) {
    const fields = line.split(' ');
    const dash = fields.indexOf('-');
    if (dash < 5 || fields.length < dash + 4) continue;
    const fstype = fields[dash + 1]!;
    if (fstype !== 'cgroup' && fstype !== 'cgroup2') continue;
    mounts.push({
      root: unescapeMount(fields[3]!),
      point: unescapeMount(fields[4]!),
      fstype,
      superOptions: fields[dash + 3]!.split(','),
    });
  }
  return mounts;
}

/** `/proc/<pid>/cgroup` as `{ id, controllers, path }` lines. */
export function parseProcCgroup(text: string): { id: string; controllers: string[]; path: string }[] {
  const lines: { id: string; controllers: string[]; path: string }[] = [];
  for (const line of text.split('\n')) {
    const first = line.indexOf(':');
    const second = line.indexOf(':', first + 1);
    if (first < 0 || second < 0) continue;
    const list = line.slice(first + 1, second);
    lines.push({ id: line.slice(0, first), controllers: list ? list.split(',') : [], path: line.slice(second + 1) });
  }
  return lines;
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

function words(path: string): string[] {
  return (readText(path) ?? '').split(/\s+/).filter(Boolean);
}

/** Where the machine's filesystem is read from: `/` in production, a staged tree in tests. */
export interface CgroupFilesystem {
  /** Prefix of `/proc` paths. @defaultValue '' */
  procRoot?: string;
}

/** A hierarchy holding `controller` for process `pid`, and the directories a kernel's cgroup could go in. */
interface Hierarchy {
  controller: CgroupControllerName;
  version: 1 | 2;
  mount: string;
  mountRoot: string;
  key: string;
  candidates: { dir: string; up: 0 | 1 }[];
}

type Problems = { -readonly [K in CgroupControllerName]?: string };

function hierarchies(pid: number, fs: CgroupFilesystem): { found: Hierarchy[]; problems: Problems } {
  const proc = fs.procRoot ?? '';
  const mounts = parseMountInfo(readText(`${proc}/proc/${pid}/mountinfo`) ?? '');
  const own = parseProcCgroup(readText(`${proc}/proc/${pid}/cgroup`) ?? '');
  const found: Hierarchy[] = [];
  const problems: Problems = {};
  for (const controller of ['memory', 'pids'] as const) {
    const v1 = mounts.find((m) => m.fstype === 'cgroup' && m.superOptions.includes(controller));
    const v2 = mounts.find(
      (m) => m.fstype === 'cgroup2' && words(join(m.point, 'cgroup.controllers')).includes(controller),
    );
    const mount = v1 ?? v2;
    if (!mount) {
      problems[controller] = `no cgroup hierarchy with the ${controller} controller is mounted`;
      continue;
    }
    const line = v1 ? own.find((l) => l.controllers.includes(controller)) : own.find((l) => l.id === '0');
    if (!line) {
      problems[controller] = `process ${pid} is in no ${controller} cgroup`;
      continue;
    }
    let rel = line.path;
    if (mount.root !== '/') {
      if (rel !== mount.root && !rel.startsWith(`${mount.root}/`)) {
        problems[controller] =
          `the ${controller} cgroup of process ${pid} (${rel}) is not under the mount ${mount.point}`;
        continue;
      }
      rel = rel.slice(mount.root.length) || '/';
    }
    const ownDir = rel === '/' ? mount.point : join(mount.point, rel);
    const candidates: { dir: string; up: 0 | 1 }[] = [];
    if (v1) candidates.push({ dir: ownDir, up: 0 });
    else {
      // A v2 cgroup with processes cannot hand controllers to children (except the root): a kernel's cgroup goes
      // beside the launcher's own, where the parent delegates the controller.
      if (words(join(ownDir, 'cgroup.subtree_control')).includes(controller)) candidates.push({ dir: ownDir, up: 0 });
      if (rel !== '/' && words(join(dirname(ownDir), 'cgroup.subtree_control')).includes(controller))
        candidates.push({ dir: dirname(ownDir), up: 1 });
      if (candidates.length === 0) {
        problems[controller] =
          `the v2 cgroup of process ${pid} (${ownDir}) and its parent do not delegate the ${controller} controller`;
        continue;
      }
    }
    found.push({
      controller,
      version: v1 ? 1 : 2,
      mount: mount.point,
      mountRoot: mount.root,
      key: v1 ? controller : '',
      candidates,
    });
  }
  return { found, problems };
}

/** The control file holding `controller`'s limit, and the value that lifts it. */
function limitFile(controller: CgroupControllerName, version: 1 | 2): { file: string; unlimited: string } {
  if (controller === 'pids') return { file: 'pids.max', unlimited: 'max' };
  return version === 1 ? { file: 'memory.limit_in_bytes', unlimited: '-1' } : { file: 'memory.max', unlimited: 'max' };
}

function errorCode(error: unknown): string {
  return (error as NodeJS.ErrnoException)?.code ?? String(error);
}

/**
 * Finds where kernels launched by process `pid` (a jupyter-server: its kernels' launchers inherit its cgroups) can
 * get a memory and a pids cgroup of their own, and checks it for real: it makes a cgroup there (`kw-probe-…`),
 * writes its limit file and removes it again. Never throws; a controller that cannot be used is in `problems`.
 *
 * Use it through `detectLimits()`, which turns the result into what each limit is enforced by.
 */
export function detectCgroups(opts: { pid?: number } & CgroupFilesystem = {}): CgroupDetection {
  const pid = opts.pid ?? process.pid;
  const { found, problems } = hierarchies(pid, opts);
  const controllers: CgroupController[] = [];
  for (const h of found) {
    const { file, unlimited } = limitFile(h.controller, h.version);
    let last = '';
    for (const candidate of h.candidates) {
      const probe = join(candidate.dir, `kw-probe-${randomBytes(6).toString('hex')}`);
      try {
        mkdirSync(probe);
      } catch (error) {
        last = `cannot create a cgroup in ${candidate.dir} (${errorCode(error)})`;
        continue;
      }
      try {
        writeFileSync(join(probe, file), unlimited);
        // Moving the launcher takes write access to the cgroup it leaves and the one it enters share.
        accessSync(join(candidate.up === 1 ? candidate.dir : probe, 'cgroup.procs'), constants.W_OK);
        const files = readdirSync(probe);
        if (
          h.controller === 'memory' &&
          h.version === 1 &&
          readText(join(probe, 'memory.use_hierarchy'))?.trim() !== '1'
        ) {
          last = `memory cgroups in ${candidate.dir} are not hierarchical (memory.use_hierarchy is 0)`;
          continue;
        }
        controllers.push({
          controller: h.controller,
          version: h.version,
          mount: h.mount,
          mountRoot: h.mountRoot,
          key: h.key,
          up: candidate.up,
          base: candidate.dir,
          files,
        });
        last = '';
        break;
      } catch (error) {
        last = `cannot set ${file} of a cgroup in ${candidate.dir} (${errorCode(error)})`;
      } finally {
        try {
          rmdirSync(probe);
        } catch {
          // a cgroup that holds nothing goes; nothing was moved into this one
        }
      }
    }
    if (last) problems[h.controller] = last;
  }
  return { controllers, problems };
}

/** The directories kernels' cgroups of process `pid` may be in (every candidate base of each controller). */
export function kernelCgroupBases(opts: { pid?: number } & CgroupFilesystem = {}): string[] {
  const { found } = hierarchies(opts.pid ?? process.pid, opts);
  return [...new Set(found.flatMap((h) => h.candidates.map((c) => c.dir)))];
}

/** The kernels' cgroups in `bases` (optionally only those of the kernelspec `tag`), as absolute directories. */
export function listKernelCgroups(bases: Iterable<string>, filter: { tag?: string; kernelId?: string } = {}): string[] {
  const found: string[] = [];
  for (const base of new Set(bases)) {
    let entries: string[];
    try {
      entries = readdirSync(base);
    } catch {
      continue;
    }
    for (const name of entries) {
      const match = KERNEL_CGROUP.exec(name);
      if (!match) continue;
      if (filter.tag !== undefined && match[1] !== filter.tag) continue;
      if (filter.kernelId !== undefined && match[2] !== filter.kernelId) continue;
      found.push(join(base, name));
    }
  }
  return found;
}

/**
 * Removes the kernels' cgroups of kernelspec `tag` in `bases` that hold no process (a cgroup with one cannot be
 * removed, and is left). Returns the directories removed.
 */
export function removeEmptyKernelCgroups(bases: Iterable<string>, tag: string): string[] {
  const removed: string[] = [];
  for (const dir of listKernelCgroups(bases, { tag })) {
    try {
      try {
        rmdirSync(join(dir, KERNEL_CGROUP_LEAF));
      } catch (error) {
        if (errorCode(error) !== 'ENOENT') throw error;
      }
      rmdirSync(dir);
      removed.push(dir);
    } catch {
      // still in use
    }
  }
  return removed;
}

/** What happened at the limits of a kernel's cgroups, over every launch of the kernel (restarts share them). */
export interface KernelLimitEvents {
  /** Processes of the kernel killed by its memory cgroup's out-of-memory killer. */
  readonly oomKills: number;
  /** Process or thread creations its pids cgroup refused. */
  readonly processLimitHits: number;
  /** The memory limit of its cgroup, in bytes, when one is set. */
  readonly memoryLimitBytes: number | undefined;
  /** The most memory its cgroup held at once, in bytes, when the kernel reports it. */
  readonly memoryPeakBytes: number | undefined;
  /** The cgroup directories read. */
  readonly cgroups: readonly string[];
}

function counter(text: string | undefined, key: string): number {
  for (const line of (text ?? '').split('\n')) {
    const [name, value] = line.trim().split(/\s+/);
    if (name === key) return Number(value) || 0;
  }
  return 0;
}

function bytes(text: string | undefined): number | undefined {
  const value = text?.trim();
  if (!value || !/^\d+$/.test(value)) return undefined;
  const n = Number(value);
  // v1 reports "no limit" as the largest page-aligned 63-bit number.
  return n >= 2 ** 62 ? undefined : n;
}

/** `dir` and the cgroups below it (a kernel's cgroup and its leaf; deeper ones a kernel might have made). */
function subtree(dir: string, depth = 3): string[] {
  const dirs = [dir];
  if (depth === 0) return dirs;
  let entries: { name: string; isDirectory(): boolean }[] = [];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return dirs;
  }
  for (const entry of entries) if (entry.isDirectory()) dirs.push(...subtree(join(dir, entry.name), depth - 1));
  return dirs;
}

/**
 * Reads the limit events of the cgroups of kernel `kernelId` (the id in its connection file's name, the gateway's
 * kernel id): how many of its processes the memory cgroup's OOM killer killed, how many process creations the pids
 * cgroup refused, and its memory limit. The counts add up over every launch of that kernel id — the server's
 * restarts reuse its cgroup — so compare with an earlier reading to tell what happened since. Synchronous and cheap
 * (a few small reads). `undefined` when the kernel has no cgroup here (launched without cgroup limits, by another
 * machine, or already cleaned up).
 *
 * Use it when a kernel died to tell an out-of-memory kill from other deaths (`KernelDiedError` reason `'oom'`):
 * pass the pid of the jupyter-server that launched it (a LocalGateway ticket's `pid`), since kernels' cgroups are made
 * in the server's cgroup.
 */
export function kernelLimitEvents(
  kernelId: string,
  opts: { pid?: number } & CgroupFilesystem = {},
): KernelLimitEvents | undefined {
  if (typeof kernelId !== 'string' || !/^[A-Za-z0-9-]+$/.test(kernelId)) return undefined;
  const { found } = hierarchies(opts.pid ?? process.pid, opts);
  let oomKills = 0;
  let processLimitHits = 0;
  let memoryLimitBytes: number | undefined;
  let memoryPeakBytes: number | undefined;
  const cgroups: string[] = [];
  for (const h of found) {
    for (const dir of listKernelCgroups(
      h.candidates.map((c) => c.dir),
      { kernelId },
    )) {
      // On v2 one directory holds both controllers: read each controller's files once, list the directory once.
      if (!cgroups.includes(dir)) cgroups.push(dir);
      if (h.controller === 'memory') {
        if (h.version === 1) {
          // v1 counts a kill in the victim's own cgroup only: add up the kernel's cgroup and everything below it.
          for (const d of subtree(dir)) oomKills += counter(readText(join(d, 'memory.oom_control')), 'oom_kill');
          memoryLimitBytes = bytes(readText(join(dir, 'memory.limit_in_bytes')));
          memoryPeakBytes = bytes(readText(join(dir, 'memory.max_usage_in_bytes')));
        } else {
          oomKills += counter(readText(join(dir, 'memory.events')), 'oom_kill');
          memoryLimitBytes = bytes(readText(join(dir, 'memory.max')));
          memoryPeakBytes = bytes(readText(join(dir, 'memory.peak')));
        }
      } else {
        const dirs = h.version === 1 ? subtree(dir) : [dir];
        for (const d of dirs) processLimitHits += counter(readText(join(d, 'pids.events')), 'max');
      }
    }
  }
  if (cgroups.length === 0) return undefined;
  return { oomKills, processLimitHits, memoryLimitBytes, memoryPeakBytes, cgroups };
}
