import { spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { removeIsolatedKernelSpec, removeIsolatedKernelSpecs, sweepIsolatedKernelSpecs } from './kernelspec-cleanup.js';
import { currentOwner, ownerState, type SpecOwner } from './kernelspec-owner.js';

let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'kw-specs-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

let serial = 0;
/** A spec folder as installIsolatedKernelSpec writes it, with `owner` in its metadata (or none). */
function spec(owner: SpecOwner | undefined, ageMs = 0): string {
  serial += 1;
  const name = `kw-iso-python3-${serial.toString(16).padStart(16, '0')}`;
  mkdirSync(join(dir, name));
  const file = join(dir, name, 'kernel.json');
  writeFileSync(file, JSON.stringify({ argv: ['x'], metadata: { kernelwarden: owner ? { owner } : {} } }));
  const when = (Date.now() - ageMs) / 1000;
  utimesSync(file, when, when);
  return name;
}

/** The identity of a process that has exited: started, its identity read, then killed. */
async function goneOwner(): Promise<SpecOwner> {
  const child = spawn('sleep', ['30'], { stdio: 'ignore' });
  await new Promise((resolve) => child.once('spawn', resolve));
  const owner = { ...currentOwner(), pid: child.pid!, startTime: '' };
  const stat = readFileSync(`/proc/${child.pid}/stat`, 'utf8');
  owner.startTime = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]!;
  expect(ownerState(owner)).toBe('alive');
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
  return owner;
}

describe('sweepIsolatedKernelSpecs', () => {
  it('removes the specs of processes that are gone, unless a running kernel uses one', async () => {
    const gone = await goneOwner();
    expect(ownerState(gone)).toBe('gone');
    const orphan = spec(gone);
    const orphanInUse = spec(gone);
    const mine = spec(currentOwner());
    const reused = spec({ ...currentOwner(), startTime: '1' }); // this pid, but another process's start time
    const otherBoot = spec({ ...currentOwner(), bootId: 'another-boot' });
    writeFileSync(join(dir, 'python3'), ''); // not ours: never touched
    mkdirSync(join(dir, 'kw-iso-not-a-hash'));

    const removed = sweepIsolatedKernelSpecs({ kernelSpecDir: dir, inUse: [orphanInUse, 'python3'] });
    expect(removed.sort()).toEqual([orphan, reused, otherBoot].sort());
    expect(readdirSync(dir).sort()).toEqual(['kw-iso-not-a-hash', mine, orphanInUse, 'python3'].sort());
  });

  it('keeps a spec whose owner it cannot see (another PID namespace, no record) until it is older than the limit', () => {
    const elsewhere = { ...currentOwner(), pidNamespace: 'pid:[1]' };
    const young = spec(elsewhere, 60_000);
    const old = spec(elsewhere, 25 * 60 * 60 * 1000);
    const unrecorded = spec(undefined, 25 * 60 * 60 * 1000);
    const unrecordedYoung = spec(undefined, 1000);
    mkdirSync(join(dir, 'kw-iso-ir-00000000000000ff')); // half-written: no kernel.json yet
    expect(sweepIsolatedKernelSpecs({ kernelSpecDir: dir, inUse: [] }).sort()).toEqual([old, unrecorded].sort());
    expect(existsSync(join(dir, young))).toBe(true);
    expect(existsSync(join(dir, unrecordedYoung))).toBe(true);
    expect(existsSync(join(dir, 'kw-iso-ir-00000000000000ff'))).toBe(true);
    expect(sweepIsolatedKernelSpecs({ kernelSpecDir: dir, inUse: [], unknownOwnerMaxAgeMs: 30_000 })).toContain(young);
  });

  it('answers an empty list for a directory that does not exist, and refuses a relative one', () => {
    expect(sweepIsolatedKernelSpecs({ kernelSpecDir: join(dir, 'nope'), inUse: [] })).toEqual([]);
    expect(() => sweepIsolatedKernelSpecs({ kernelSpecDir: 'relative', inUse: [] })).toThrow(/kernelSpecDir/);
  });
});

describe('removeIsolatedKernelSpecs', () => {
  it("removes a session's own specs except those a running kernel still uses", () => {
    const a = spec(currentOwner());
    const b = spec(currentOwner());
    const other = spec(currentOwner());
    expect(removeIsolatedKernelSpecs({ kernelSpecDir: dir, names: [a, b, a], inUse: [b] })).toEqual({
      removed: [a],
      kept: [b],
    });
    expect(readdirSync(dir).sort()).toEqual([b, other].sort());
    expect(() => removeIsolatedKernelSpecs({ kernelSpecDir: dir, names: ['../python3'], inUse: [] })).toThrow(
      /not an isolated kernelspec name/,
    );
  });
});

describe("the kernels' cgroups of a spec", () => {
  it("go with the spec when they hold nothing; a busy one, or another spec's, stays", () => {
    const name = `kw-iso-python3-${'a'.repeat(16)}`;
    const cgroups = join(dir, 'cgroups');
    mkdirSync(join(dir, name));
    writeFileSync(
      join(dir, name, 'kernel.json'),
      JSON.stringify({ argv: ['x'], metadata: { kernelwarden: { limits: { cgroupDirs: [cgroups, 'relative'] } } } }),
    );
    // Plain directories stand in for cgroups: an empty one can be removed, one with a file in it (a process) cannot.
    mkdirSync(join(cgroups, `kw-${'a'.repeat(16)}-k1`, 'kernel'), { recursive: true });
    mkdirSync(join(cgroups, `kw-${'a'.repeat(16)}-k2`, 'kernel'), { recursive: true });
    writeFileSync(join(cgroups, `kw-${'a'.repeat(16)}-k2`, 'kernel', 'cgroup.procs'), '1\n');
    mkdirSync(join(cgroups, `kw-${'b'.repeat(16)}-k3`, 'kernel'), { recursive: true });
    const started = Date.now();
    expect(removeIsolatedKernelSpecs({ kernelSpecDir: dir, names: [name], inUse: [] }).removed).toEqual([name]);
    // It waited a moment for the busy one to empty, no more.
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(readdirSync(cgroups).sort()).toEqual([`kw-${'a'.repeat(16)}-k2`, `kw-${'b'.repeat(16)}-k3`]);
    expect(existsSync(join(dir, name))).toBe(false);
  });

  it('are looked for only where the spec recorded them: a spec without limits removes nothing else', () => {
    const name = spec(undefined);
    const cgroups = join(dir, 'cgroups');
    mkdirSync(join(cgroups, `kw-${name.slice(-16)}-k1`), { recursive: true });
    removeIsolatedKernelSpec(dir, name);
    expect(readdirSync(cgroups)).toEqual([`kw-${name.slice(-16)}-k1`]);
  });
});
