import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CgroupController } from './cgroup.js';
import { IsolationPolicyError } from './errors.js';
import {
  CONNECTION_MARK,
  LAUNCH_SCRIPT,
  type LaunchCgroups,
  launchCheckArguments,
  type PathRecord,
  recordPaths,
} from './launch-check.js';
import type { CgroupLimit } from './limit-support.js';
import { findExecutable } from './sandbox.js';
import { runProcess } from './subprocess.js';

let base: string;
let ws: string;
let secret: string;
const stat = findExecutable('stat', '/usr/bin:/bin')!;

beforeEach(() => {
  base = realpathSync(mkdtempSync(join(tmpdir(), 'kw-launch-')));
  ws = join(base, 'ws');
  secret = join(ws, 'sub', 'secret');
  mkdirSync(secret, { recursive: true });
  writeFileSync(join(secret, 'data.txt'), 'TOP-SECRET');
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

/** Runs the launcher the way jupyter does, with a command that prints its arguments instead of bwrap. */
function launch(record: PathRecord, connectionFile = join(base, 'runtime', 'kernel-1.json'), cgroups?: LaunchCgroups) {
  return runProcess(
    [
      '/bin/sh',
      '-c',
      LAUNCH_SCRIPT,
      'kernelwarden-isolated-kernel',
      connectionFile,
      ...launchCheckArguments(stat, record, cgroups),
      '/bin/sh',
      '-c',
      'printf "%s\\n" "$@"; echo "pid $$"',
      'cmd',
      'before',
      CONNECTION_MARK,
      'after',
    ],
    { timeoutMs: 10_000 },
  );
}

describe('recordPaths', () => {
  it('records each path and every ancestor but /, sorted, as device:inode', () => {
    const record = recordPaths([secret, ws]);
    expect(record.paths).toEqual([
      ...base
        .split('/')
        .filter(Boolean)
        .map((_, i, parts) => `/${parts.slice(0, i + 1).join('/')}`),
      ws,
      join(ws, 'sub'),
      secret,
    ]);
    const s = statSync(secret, { bigint: true });
    expect(record.ids.at(-1)).toBe(`${s.dev}:${s.ino}`);
  });

  it('refuses a path that passes through a symbolic link, or is missing, or that jupyter would rewrite', () => {
    symlinkSync(ws, join(base, 'link'));
    expect(() => recordPaths([join(base, 'link', 'sub')])).toThrow(IsolationPolicyError);
    expect(() => recordPaths([join(base, 'link', 'sub')])).toThrow(/is a symbolic link/);
    expect(() => recordPaths([join(base, 'nope')])).toThrow(/does not exist/);
    expect(() => recordPaths([join(base, '{prefix}')])).toThrow(/jupyter would rewrite/);
    expect(() => recordPaths([join(base, 'a\nb')])).toThrow(/line break/);
  });
});

describe('the kernelspec launcher', () => {
  it('runs the command when nothing changed, with the connection-file steps in place of the marker', async () => {
    const result = await launch(recordPaths([secret, ws]));
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const cf = join(base, 'runtime', 'kernel-1.json');
    expect(result.stdout.trim().split('\n').slice(0, -1)).toEqual([
      'before',
      '--tmpfs',
      join(base, 'runtime'),
      '--bind',
      cf,
      cf,
      'after',
    ]);
  });

  it("refuses, naming the path, when the hidden root's parent was moved away and a decoy left in its place", async () => {
    const record = recordPaths([secret, ws]);
    renameSync(join(ws, 'sub'), join(ws, 'moved'));
    mkdirSync(secret, { recursive: true });
    const result = await launch(record);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr.trim().split('\n')).toEqual([
      `kernelwarden: the isolated kernel was not started: ${join(ws, 'sub')} is no longer the same directory ` +
        '(moved, replaced or a symbolic link) since its read-isolation policy was checked; start a new session to ' +
        'check the policy again',
    ]);
  });

  it('refuses a hidden root swapped for a symbolic link to itself, and one that is gone', async () => {
    const record = recordPaths([secret, ws]);
    renameSync(secret, join(ws, 'elsewhere'));
    symlinkSync(join(ws, 'elsewhere'), secret);
    const swapped = await launch(record);
    expect(swapped.code).toBe(1);
    expect(swapped.stderr).toContain(`${secret} is no longer the same directory`);
    rmSync(secret);
    const gone = await launch(record);
    expect(gone.code).toBe(1);
    expect(gone.stdout).toBe('');
    expect(gone.stderr).toContain(`${secret} is gone since its read-isolation policy was checked`);
  });

  it('passes paths with spaces, quotes, globs and dollars through unchanged', async () => {
    const odd = join(base, "it's a $HOME * [dir]");
    mkdirSync(odd);
    expect((await launch(recordPaths([odd]))).code).toBe(0);
    const record = recordPaths([odd]);
    renameSync(odd, `${odd}.old`);
    mkdirSync(odd);
    const result = await launch(record);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`${odd} is no longer the same directory`);
  });
});

const TAG = '0123456789abcdef';
const MiB = 1024 * 1024;

function v1(controller: 'memory' | 'pids', mount: string): CgroupController {
  return { controller, version: 1, mount, mountRoot: '/', key: controller, up: 0, base: mount, files: [] };
}

/**
 * A staged cgroup v1 machine: plain directories stand in for the memory and pids hierarchies, and a file for
 * /proc/self/cgroup (the launcher's process in memory `/session`, pids `/`).
 */
function stageCgroups(): { memory: string; pids: string; cgroups: LaunchCgroups } {
  const memory = join(base, 'cg', 'memory');
  const pids = join(base, 'cg', 'pids');
  mkdirSync(join(memory, 'session'), { recursive: true });
  mkdirSync(pids, { recursive: true });
  mkdirSync(join(base, 'runtime'), { recursive: true });
  const cgroupFile = join(base, 'proc-self-cgroup');
  writeFileSync(cgroupFile, '5:cpu,cpuacct:/\n4:memory:/session\n8:pids:/\n0::/\n');
  const limits: CgroupLimit[] = [
    {
      controller: v1('memory', memory),
      limit: 'memoryBytes',
      settings: [
        ['memory.limit_in_bytes', String(512 * MiB)],
        ['memory.memsw.limit_in_bytes', String(512 * MiB)],
      ],
    },
    { controller: v1('pids', pids), limit: 'maxProcesses', settings: [['pids.max', '64']] },
  ];
  return { memory: join(memory, 'session'), pids, cgroups: { tag: TAG, limits, cgroupFile } };
}

describe('the kernelspec launcher with cgroup limits', () => {
  const kernel = 'c0ffee00-0000-4000-8000-000000000001';
  const cf = () => join(base, 'runtime', `kernel-${kernel}.json`);

  it("makes the kernel's cgroup in its own, writes the limits there, joins the leaf, then runs the command", async () => {
    const staged = stageCgroups();
    const result = await launch(recordPaths([ws]), cf(), staged.cgroups);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const pid = result.stdout.trim().split('\n').at(-1)!.replace('pid ', '');
    const memory = join(staged.memory, `kw-${TAG}-${kernel}`);
    const pids = join(staged.pids, `kw-${TAG}-${kernel}`);
    expect(readFileSync(join(memory, 'memory.limit_in_bytes'), 'utf8')).toBe(`${512 * MiB}\n`);
    expect(readFileSync(join(memory, 'memory.memsw.limit_in_bytes'), 'utf8')).toBe(`${512 * MiB}\n`);
    expect(readFileSync(join(pids, 'pids.max'), 'utf8')).toBe('64\n');
    // The process that ran the command is the one that joined: exec keeps it in its cgroups.
    expect(readFileSync(join(memory, 'kernel', 'cgroup.procs'), 'utf8')).toBe(`${pid}\n`);
    expect(readFileSync(join(pids, 'kernel', 'cgroup.procs'), 'utf8')).toBe(`${pid}\n`);
    // A restart of the same kernel launches into the same cgroup.
    expect((await launch(recordPaths([ws]), cf(), staged.cgroups)).code).toBe(0);
    expect(readdirSync(staged.memory)).toEqual([`kw-${TAG}-${kernel}`]);
  });

  it("removes the empty cgroups of kernels the gateway forgot, and keeps known, busy and other specs' ones", async () => {
    const staged = stageCgroups();
    const dir = (tag: string, id: string) => join(staged.memory, `kw-${tag}-${id}`);
    for (const d of [dir(TAG, 'gone'), dir(TAG, 'known'), dir('fedcba9876543210', 'gone')])
      mkdirSync(join(d, 'kernel'), { recursive: true });
    mkdirSync(join(dir(TAG, 'busy'), 'kernel'), { recursive: true });
    writeFileSync(join(dir(TAG, 'busy'), 'kernel', 'cgroup.procs'), '4242\n');
    writeFileSync(join(base, 'runtime', 'kernel-known.json'), '{}');
    const result = await launch(recordPaths([ws]), cf(), staged.cgroups);
    expect(result.code).toBe(0);
    expect(readdirSync(staged.memory).sort()).toEqual(
      [`kw-${TAG}-${kernel}`, `kw-${TAG}-busy`, `kw-${TAG}-known`, 'kw-fedcba9876543210-gone'].sort(),
    );
  });

  it('goes beside its own cgroup on v2, and names a launch without a kernel id by its pid', async () => {
    const cg = join(base, 'cg2');
    mkdirSync(join(cg, 'user', 'app.scope'), { recursive: true });
    const cgroupFile = join(base, 'proc-self-cgroup');
    writeFileSync(cgroupFile, '0::/user/app.scope\n');
    const controller: CgroupController = {
      controller: 'memory',
      version: 2,
      mount: cg,
      mountRoot: '/',
      key: '',
      up: 1,
      base: join(cg, 'user'),
      files: [],
    };
    const result = await launch(recordPaths([ws]), join(base, 'runtime', 'odd name.json'), {
      tag: TAG,
      limits: [{ controller, limit: 'memoryBytes', settings: [['memory.max', '268435456']] }],
      cgroupFile,
    });
    expect(result.stderr).toBe('');
    const pid = result.stdout.trim().split('\n').at(-1)!.replace('pid ', '');
    expect(readFileSync(join(cg, 'user', `kw-${TAG}-p${pid}`, 'memory.max'), 'utf8')).toBe('268435456\n');
  });

  it('refuses to start, naming the limit, when its cgroup cannot be made, written or found', async () => {
    const staged = stageCgroups();
    rmSync(staged.pids, { recursive: true });
    const missing = await launch(recordPaths([ws]), cf(), staged.cgroups);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toBe('');
    expect(missing.stderr.trim()).toBe(
      `kernelwarden: the kernel was not started: its process limit (maxProcesses) could not be set up: cannot create the cgroup ${join(staged.pids, `kw-${TAG}-${kernel}`)}`,
    );

    mkdirSync(staged.pids);
    const limitFile = join(staged.memory, `kw-${TAG}-${kernel}`, 'memory.limit_in_bytes');
    rmSync(limitFile);
    mkdirSync(limitFile);
    const unwritable = await launch(recordPaths([ws]), cf(), staged.cgroups);
    expect(unwritable.code).toBe(1);
    expect(unwritable.stderr.trim()).toBe(
      `kernelwarden: the kernel was not started: its memory limit (memoryBytes) could not be set up: cannot write ${512 * MiB} to ${join(staged.memory, `kw-${TAG}-${kernel}`, 'memory.limit_in_bytes')}`,
    );

    writeFileSync(staged.cgroups.cgroupFile!, '0::/\n');
    const nowhere = await launch(recordPaths([ws]), cf(), staged.cgroups);
    expect(nowhere.code).toBe(1);
    expect(nowhere.stderr).toMatch(
      /its memory limit \(memoryBytes\) could not be set up: this process is in no cgroup/,
    );
    expect(existsSync(join(staged.pids, `kw-${TAG}-${kernel}`))).toBe(true);
  });

  it('refuses arguments the launcher could not carry', () => {
    const staged = stageCgroups();
    expect(() => launchCheckArguments(stat, recordPaths([ws]), { ...staged.cgroups, tag: 'nope' })).toThrow(/16 hex/);
    const bad = { ...staged.cgroups.limits[1]!, controller: v1('pids', '/sys/fs/cgroup/a\tb') };
    expect(() => launchCheckArguments(stat, recordPaths([ws]), { tag: TAG, limits: [bad] })).toThrow(
      IsolationPolicyError,
    );
  });
});
