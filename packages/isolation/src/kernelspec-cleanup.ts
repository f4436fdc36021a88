import { readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidOptionsError } from '@kernelwarden/core';
import { kernelCgroupBases, listKernelCgroups, removeEmptyKernelCgroups } from './cgroup.js';
import { ownerState, parseOwner } from './kernelspec-owner.js';
import { isAbsolutePath } from './paths.js';

/** The names `installIsolatedKernelSpec()` gives: `kw-iso-<base>-<16 hex>`. */
export const ISOLATED_SPEC_NAME = /^kw-iso-[a-z0-9._-]+-[0-9a-f]{16}$/;

/**
 * How old an isolated kernelspec whose owner cannot be told alive or gone (no owner record, or an owner in another
 * PID namespace) must be before `sweepIsolatedKernelSpecs()` removes it. @defaultValue 86400000 (24 hours)
 */
export const UNKNOWN_OWNER_MAX_AGE_MS = 24 * 60 * 60 * 1000;

function checkDir(kernelSpecDir: unknown): asserts kernelSpecDir is string {
  if (!isAbsolutePath(kernelSpecDir)) {
    throw new InvalidOptionsError([{ path: 'kernelSpecDir', message: 'expected an absolute path' }], {
      subject: 'isolated kernelspec',
    });
  }
}

/** How long a removal waits for the processes of a spec's last kernel to leave its cgroups. */
const CGROUP_DRAIN_MS = 1000;

function pause(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Removes the kernels' cgroups of spec `name` (`kw-<its hash>-*` in the directories its metadata records, and in
 * this process's own cgroups) that hold no process, waiting up to a second for the processes of a kernel that was
 * just shut down to be gone. Then removes the spec's folder.
 */
function removeSpecFolder(kernelSpecDir: string, name: string): void {
  const dir = join(kernelSpecDir, name);
  let recorded: string[] = [];
  try {
    const spec = JSON.parse(readFileSync(join(dir, 'kernel.json'), 'utf8')) as {
      metadata?: { kernelwarden?: { limits?: { cgroupDirs?: unknown } } };
    };
    const dirs = spec.metadata?.kernelwarden?.limits?.cgroupDirs;
    if (Array.isArray(dirs)) recorded = dirs.filter((d): d is string => isAbsolutePath(d));
  } catch {
    // no readable spec: only this process's own cgroups are looked at
  }
  if (recorded.length > 0) {
    const tag = name.slice(-16);
    const bases = [...recorded, ...kernelCgroupBases()];
    for (let waited = 0; ; waited += 20) {
      removeEmptyKernelCgroups(bases, tag);
      if (listKernelCgroups(bases, { tag }).length === 0 || waited >= CGROUP_DRAIN_MS) break;
      pause(20);
    }
  }
  rmSync(dir, { recursive: true, force: true });
}

function checkName(name: unknown): asserts name is string {
  if (typeof name !== 'string' || !ISOLATED_SPEC_NAME.test(name)) {
    throw new InvalidOptionsError([{ path: 'name', message: 'not an isolated kernelspec name' }], {
      subject: 'isolated kernelspec',
    });
  }
}

/**
 * Removes a kernelspec written by `installIsolatedKernelSpec()`, whoever uses it, and the empty cgroups its kernels
 * had (limits). Only names it made (`kw-iso-…`) are accepted.
 *
 * Prefer `removeIsolatedKernelSpecs()` (which keeps a spec a running kernel still uses) when a session ends; use
 * this one when you know no kernel runs on the spec.
 */
export function removeIsolatedKernelSpec(kernelSpecDir: string, name: string): void {
  checkDir(kernelSpecDir);
  checkName(name);
  removeSpecFolder(kernelSpecDir, name);
}

/** Options of `removeIsolatedKernelSpecs()`. */
export interface RemoveIsolatedKernelSpecsOptions {
  /** The kernelspec directory they were installed into. */
  kernelSpecDir: string;
  /** The names `installIsolatedKernelSpec()` returned to this session. */
  names: Iterable<string>;
  /**
   * The kernelspec names of the kernels the gateway still runs (`GET /api/kernels`, each kernel's `name`): a spec
   * named here is kept, since a restart of its kernel would launch it again.
   */
  inUse: Iterable<string>;
}

/**
 * Removes the isolated kernelspecs a session installed, once it has shut its kernels down, except those a running
 * kernel still uses, and the cgroups their kernels had (waiting up to a second for a kernel just shut down to leave). Returns what it removed and what it kept; a kept spec is removed by a later
 * `sweepIsolatedKernelSpecs()` once its kernel and its owner process are gone.
 *
 * Use it when a session (a CLI command, a server's conversation) ends.
 */
export function removeIsolatedKernelSpecs(opts: RemoveIsolatedKernelSpecsOptions): {
  removed: string[];
  kept: string[];
} {
  checkDir(opts?.kernelSpecDir);
  const inUse = new Set(opts.inUse);
  const removed: string[] = [];
  const kept: string[] = [];
  for (const name of new Set(opts.names)) {
    checkName(name);
    if (inUse.has(name)) {
      kept.push(name);
      continue;
    }
    removeSpecFolder(opts.kernelSpecDir, name);
    removed.push(name);
  }
  return { removed, kept };
}

/** Options of `sweepIsolatedKernelSpecs()`. */
export interface SweepIsolatedKernelSpecsOptions {
  /** The kernelspec directory to sweep (`LocalGateway` ticket's `kernelSpecDir`). */
  kernelSpecDir: string;
  /** The kernelspec names of the kernels the gateway runs (`GET /api/kernels`, each kernel's `name`); never removed. */
  inUse: Iterable<string>;
  /**
   * Age after which a spec whose owner cannot be told alive or gone is removed anyway.
   * @defaultValue UNKNOWN_OWNER_MAX_AGE_MS (24 hours)
   */
  unknownOwnerMaxAgeMs?: number;
  /** The current time in ms since the epoch (tests). @defaultValue Date.now() */
  now?: number;
}

/**
 * Removes the isolated kernelspecs left behind by processes that are gone (killed before they could remove their
 * own): a `kw-iso-…` spec is removed when no kernel in `inUse` uses it and the process that installed it has
 * exited (same boot, same PID namespace; a reused pid is told apart by its start time). A spec whose owner cannot be
 * told (no owner record, another PID namespace) is removed once it is older than `unknownOwnerMaxAgeMs`. Specs of
 * live processes, this one's included, are never touched. The empty cgroups of a removed spec's kernels (limits) go
 * with it. Returns the names removed.
 *
 * Use it before installing isolated kernelspecs into a shared kernelspec directory (the CLI does, on the first
 * isolated kernel of each command).
 */
export function sweepIsolatedKernelSpecs(opts: SweepIsolatedKernelSpecsOptions): string[] {
  checkDir(opts?.kernelSpecDir);
  const maxAge = opts.unknownOwnerMaxAgeMs ?? UNKNOWN_OWNER_MAX_AGE_MS;
  if (typeof maxAge !== 'number' || !(maxAge >= 0)) {
    throw new InvalidOptionsError([{ path: 'unknownOwnerMaxAgeMs', message: 'expected a number >= 0' }], {
      subject: 'isolated kernelspec sweep',
    });
  }
  const now = opts.now ?? Date.now();
  const inUse = new Set(opts.inUse);
  let entries: string[];
  try {
    entries = readdirSync(opts.kernelSpecDir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of entries) {
    if (!ISOLATED_SPEC_NAME.test(name) || inUse.has(name)) continue;
    const dir = join(opts.kernelSpecDir, name);
    let state: 'alive' | 'gone' | 'unknown' = 'unknown';
    let writtenAt: number | undefined;
    try {
      const file = join(dir, 'kernel.json');
      writtenAt = statSync(file).mtimeMs;
      const spec = JSON.parse(readFileSync(file, 'utf8')) as { metadata?: { kernelwarden?: { owner?: unknown } } };
      const owner = parseOwner(spec.metadata?.kernelwarden?.owner);
      if (owner) state = ownerState(owner);
    } catch {
      // no readable kernel.json: judged by the folder's age
      try {
        writtenAt = statSync(dir).mtimeMs;
      } catch {
        continue;
      }
    }
    if (state === 'alive') continue;
    if (state === 'unknown' && (writtenAt === undefined || now - writtenAt < maxAge)) continue;
    removeSpecFolder(opts.kernelSpecDir, name);
    removed.push(name);
  }
  return removed;
}
