import { mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  detectCgroups,
  kernelCgroupBases,
  kernelCgroupName,
  kernelLimitEvents,
  listKernelCgroups,
  parseMountInfo,
  parseProcCgroup,
  removeEmptyKernelCgroups,
} from './cgroup.js';

const TAG = '0123456789abcdef';
const KERNEL = 'a1b2c3d4-0000-4000-8000-000000000001';
let root: string;

beforeEach(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'kw-cgroup-')));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

function file(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text);
}

function mountLine(point: string, fstype: 'cgroup' | 'cgroup2', options: string): string {
  return `36 25 0:30 / ${point} rw,nosuid,nodev,noexec,relatime shared:9 - ${fstype} cgroup rw,${options}`;
}

/** A staged machine: /proc/123 of a process in cgroup v1 memory `/session` and pids `/`. */
function stageV1(): { cg: string } {
  const cg = join(root, 'cg');
  file(
    join(root, 'proc/123/mountinfo'),
    [
      '22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw',
      mountLine(join(cg, 'memory'), 'cgroup', 'memory'),
      mountLine(join(cg, 'pids'), 'cgroup', 'pids'),
      mountLine(join(cg, 'cpu,cpuacct'), 'cgroup', 'cpu,cpuacct'),
    ].join('\n'),
  );
  file(join(root, 'proc/123/cgroup'), '5:cpu,cpuacct:/\n4:memory:/session\n8:pids:/\n0::/\n');
  return { cg };
}

describe('parsing /proc', () => {
  it('reads cgroup mounts from mountinfo, spaces in mount points included, and nothing else', () => {
    const mounts = parseMountInfo(
      [
        '22 1 8:1 / / rw - ext4 /dev/sda1 rw',
        '30 22 0:26 / /sys/fs/cgroup rw shared:4 - cgroup2 cgroup2 rw,nsdelegate',
        '31 22 0:27 /sub /mnt/my\\040cgroups rw - cgroup cgroup rw,memory',
      ].join('\n'),
    );
    expect(mounts).toEqual([
      { root: '/', point: '/sys/fs/cgroup', fstype: 'cgroup2', superOptions: ['rw', 'nsdelegate'] },
      { root: '/sub', point: '/mnt/my cgroups', fstype: 'cgroup', superOptions: ['rw', 'memory'] },
    ]);
  });

  it('reads /proc/<pid>/cgroup lines, paths with colons included', () => {
    expect(parseProcCgroup('4:memory:/a:b\n0::/user.slice\n1:name=systemd:/\n')).toEqual([
      { id: '4', controllers: ['memory'], path: '/a:b' },
      { id: '0', controllers: [], path: '/user.slice' },
      { id: '1', controllers: ['name=systemd'], path: '/' },
    ]);
  });
});

describe('kernelLimitEvents', () => {
  it("adds up a v1 kernel's OOM kills over its cgroup and its leaf, and reads its limit and pids events", () => {
    const { cg } = stageV1();
    const memory = join(cg, 'memory/session', kernelCgroupName(TAG, KERNEL));
    file(join(memory, 'memory.oom_control'), 'oom_kill_disable 0\nunder_oom 0\noom_kill 0\n');
    file(join(memory, 'kernel/memory.oom_control'), 'oom_kill_disable 0\nunder_oom 0\noom_kill 2\n');
    file(join(memory, 'memory.limit_in_bytes'), '536870912\n');
    file(join(memory, 'memory.max_usage_in_bytes'), '536363008\n');
    const pids = join(cg, 'pids', kernelCgroupName(TAG, KERNEL));
    file(join(pids, 'pids.events'), 'max 7\n');
    // Another kernel's cgroup is not read.
    file(join(cg, 'memory/session', kernelCgroupName(TAG, 'other'), 'kernel/memory.oom_control'), 'oom_kill 5\n');

    expect(kernelLimitEvents(KERNEL, { pid: 123, procRoot: root })).toEqual({
      oomKills: 2,
      processLimitHits: 7,
      memoryLimitBytes: 536870912,
      memoryPeakBytes: 536363008,
      cgroups: [memory, pids],
    });
  });

  it('reads a v2 kernel cgroup beside the launcher, and treats "max" as no limit', () => {
    const cg = join(root, 'cg2');
    file(join(root, 'proc/7/mountinfo'), mountLine(cg, 'cgroup2', 'nsdelegate'));
    file(join(root, 'proc/7/cgroup'), '0::/user/app.scope\n');
    file(join(cg, 'cgroup.controllers'), 'cpu memory pids\n');
    file(join(cg, 'user/cgroup.subtree_control'), 'memory pids\n');
    file(join(cg, 'user/app.scope/cgroup.subtree_control'), '\n');
    const dir = join(cg, 'user', kernelCgroupName(TAG, KERNEL));
    file(join(dir, 'memory.events'), 'low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n');
    file(join(dir, 'memory.max'), 'max\n');
    file(join(dir, 'pids.events'), 'max 4\n');

    expect(kernelCgroupBases({ pid: 7, procRoot: root })).toEqual([join(cg, 'user')]);
    expect(kernelLimitEvents(KERNEL, { pid: 7, procRoot: root })).toEqual({
      oomKills: 1,
      processLimitHits: 4,
      memoryLimitBytes: undefined,
      memoryPeakBytes: undefined,
      cgroups: [dir],
    });
  });

  it('answers undefined for a kernel without cgroups and for an id that is not one', () => {
    stageV1();
    expect(kernelLimitEvents(KERNEL, { pid: 123, procRoot: root })).toBeUndefined();
    expect(kernelLimitEvents('../etc', { pid: 123, procRoot: root })).toBeUndefined();
    expect(kernelLimitEvents(KERNEL, { pid: 99, procRoot: root })).toBeUndefined();
  });
});

describe('removeEmptyKernelCgroups', () => {
  it("removes a kernelspec's kernel cgroups that hold nothing, and leaves busy ones and other specs' alone", () => {
    const base = join(root, 'base');
    const empty = join(base, kernelCgroupName(TAG, 'gone'));
    const busy = join(base, kernelCgroupName(TAG, 'running'));
    const other = join(base, kernelCgroupName('fedcba9876543210', 'gone'));
    mkdirSync(join(empty, 'kernel'), { recursive: true });
    mkdirSync(join(other, 'kernel'), { recursive: true });
    // A plain directory with a file in it stands in for a cgroup with a process: rmdir refuses both.
    file(join(busy, 'kernel', 'cgroup.procs'), '42\n');
    mkdirSync(join(base, 'not-ours'));

    expect(removeEmptyKernelCgroups([base], TAG)).toEqual([empty]);
    expect(readdirSync(base).sort()).toEqual(
      [kernelCgroupName('fedcba9876543210', 'gone'), busy.split('/').at(-1), 'not-ours'].sort(),
    );
    expect(listKernelCgroups([base], { tag: TAG })).toEqual([busy]);
  });
});

describe('detectCgroups', () => {
  it('finds where this process could make kernel cgroups, consistently with /proc/self/cgroup, and leaves nothing', () => {
    const found = detectCgroups();
    for (const c of found.controllers) {
      expect(['memory', 'pids']).toContain(c.controller);
      expect(c.base === c.mount || c.base.startsWith(`${c.mount}/`)).toBe(true);
      expect(readdirSync(c.base).filter((n) => n.startsWith('kw-probe-'))).toEqual([]);
    }
    for (const name of ['memory', 'pids'] as const) {
      const usable = found.controllers.some((c) => c.controller === name);
      expect(usable || typeof found.problems[name] === 'string').toBe(true);
    }
  });

  it('says why a controller cannot be used', () => {
    stageV1();
    // The staged mount points do not exist: nothing can be made there.
    const found = detectCgroups({ pid: 123, procRoot: root });
    expect(found.controllers).toEqual([]);
    expect(found.problems.memory).toMatch(/^cannot create a cgroup in .*cg\/memory\/session \(ENOENT\)$/);
    expect(found.problems.pids).toMatch(/cannot create a cgroup in .*cg\/pids/);
  });
});
