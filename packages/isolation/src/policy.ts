import { realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { resolve } from 'node:path';
import { InvalidOptionsError, type ReadIsolationPolicy } from '@kernelwarden/core';
import { IsolationPolicyError } from './errors.js';
import { type KernelLimits, limitIssues, requestedLimits } from './limits.js';
import { inspectPath, isAbsolutePath, isWithin, overlaps } from './paths.js';

/** A directory named in a policy, with the label its error messages use ("team data directory"). */
export interface LabelledPath {
  /** Absolute path; it must already be canonical (no symbolic link on the way). */
  path: string;
  /** What the directory is, for error messages: `<label> cannot be isolated: …`. */
  label: string;
}

/** Options of `createReadIsolationPolicy()`: the directories to hide, and optionally limits (`KernelLimits`). */
export interface ReadIsolationPolicyOptions extends KernelLimits {
  /** Directories hidden from the kernel: it sees each as an empty, read-only directory. At least one. */
  roots: readonly LabelledPath[];
  /**
   * Directories the kernel may read again. One inside a hidden root re-exposes just that subtree, read-only;
   * one outside every root changes nothing (it is readable anyway) but is kept. @defaultValue []
   */
  allowedRoots?: readonly LabelledPath[];
  /**
   * The system temporary directory hidden roots are checked against (each kernel gets a private one).
   * @defaultValue the canonical form of `os.tmpdir()`
   */
  tempDir?: string;
}

/**
 * Options of `createKernelPolicy()`: hidden directories, limits, or both. Without `roots` the kernel reads the
 * filesystem as its user does, only the gateway's own state kept from it, and writes only its workspace and its
 * private temp, like every sandboxed kernel.
 */
export interface KernelPolicyOptions extends Omit<ReadIsolationPolicyOptions, 'roots'> {
  /** Directories hidden from the kernel (each seen as an empty, read-only directory). @defaultValue [] */
  roots?: readonly LabelledPath[];
}

/**
 * A checked policy: canonical absolute paths and validated limits, frozen. Hand it to
 * `KernelSession({ readIsolation })`, `wrapCommand()` or `installIsolatedKernelSpec()`.
 */
export interface IsolationPolicy extends ReadIsolationPolicy, KernelLimits {
  readonly roots: readonly string[];
  readonly allowedRoots: readonly string[];
  /** The canonical system temporary directory the roots were checked against. */
  readonly tempDir: string;
}

function validate(opts: KernelPolicyOptions, rootsRequired: boolean, subject: string): void {
  const issues: { path: string; message: string }[] = [];
  if (opts === null || typeof opts !== 'object') {
    throw new InvalidOptionsError([{ path: '', message: 'expected an object' }], { subject });
  }
  const checkList = (list: unknown, name: string, required: boolean) => {
    if (list === undefined && !required) return;
    if (!Array.isArray(list)) {
      issues.push({ path: name, message: 'expected an array of { path, label }' });
      return;
    }
    if (required && list.length === 0) issues.push({ path: name, message: 'at least one hidden root is required' });
    list.forEach((entry: unknown, i) => {
      const e = entry as Partial<LabelledPath> | null;
      if (e === null || typeof e !== 'object') {
        issues.push({ path: `${name}.${i}`, message: 'expected { path, label }' });
        return;
      }
      if (!isAbsolutePath(e.path)) issues.push({ path: `${name}.${i}.path`, message: 'expected an absolute path' });
      if (typeof e.label !== 'string' || e.label.trim() === '')
        issues.push({ path: `${name}.${i}.label`, message: 'expected a non-empty label' });
    });
  };
  checkList(opts.roots, 'roots', rootsRequired);
  checkList(opts.allowedRoots, 'allowedRoots', false);
  if (opts.tempDir !== undefined && !isAbsolutePath(opts.tempDir))
    issues.push({ path: 'tempDir', message: 'expected an absolute path' });
  issues.push(...limitIssues(opts));
  if (issues.length > 0) throw new InvalidOptionsError(issues, { subject });
}

/** Checks that `entry` names an existing directory reached through no symbolic link; returns its canonical path. */
export function canonicalDirectory(entry: LabelledPath): string {
  const found = inspectPath(entry.path);
  switch (found.kind) {
    case 'directory':
      return found.path;
    case 'symlink':
      throw new IsolationPolicyError(
        `${entry.label} cannot be isolated: ${found.path} is or passes through a symbolic link (${found.at}); ` +
          'use a real directory',
        { path: found.path },
      );
    case 'missing':
      throw new IsolationPolicyError(
        `${entry.label} does not exist: ${found.path} (${found.at} is missing); create it before launching kernels`,
        { path: found.path },
      );
    case 'not-directory':
      throw new IsolationPolicyError(`${entry.label} is not a directory: ${found.path}`, { path: found.path });
  }
}

/** The canonical system temporary directory (`os.tmpdir()` with every link resolved). */
export function canonicalTempDir(tempDir?: string): string {
  const chosen = tempDir ?? tmpdir();
  try {
    return realpathSync.native(resolve(chosen));
  } catch (cause) {
    throw new IsolationPolicyError(`The system temporary directory ${chosen} cannot be resolved`, {
      path: chosen,
      cause,
    });
  }
}

/**
 * Computes a read-isolation policy: which directories a kernel may not read (`roots`) and which ones inside them it
 * may read again (`allowedRoots`), as canonical absolute paths.
 *
 * Use it to describe what to hide; enforce it with `installIsolatedKernelSpec()` (kernels through a local gateway)
 * or `wrapCommand()` (any command). It reads the disk (lstat/realpath) and writes nothing. Throws
 * `IsolationPolicyError` for a root or allowed root that is or passes through a symbolic link
 * (`<label> cannot be isolated`), roots that nest (`must not overlap`), a root overlapping the system temporary
 * directory (`must not overlap the canonical system temporary directory`), an allowed root that contains a hidden
 * root, or a missing directory; `InvalidOptionsError` for malformed options. Limit fields (`memoryBytes`,
 * `maxProcesses`, `cpuSeconds`, `network`) are checked and kept, as `createKernelPolicy()` does.
 */
export function createReadIsolationPolicy(opts: ReadIsolationPolicyOptions): IsolationPolicy {
  validate(opts, true, 'read-isolation policy');
  return buildPolicy(opts);
}

/**
 * Computes a kernel policy from hidden directories, limits, or both: `createReadIsolationPolicy()` without the need
 * for a hidden root. A policy without roots is a limits-only policy: the kernel runs in the same sandbox (no
 * capability, its own PID namespace, the gateway's secrets out of reach, the host's filesystem read-only but for its
 * workspace and private temp) but reads the filesystem as its user does.
 *
 * Use it for `--memory`-style limits with or without `--hide`. The limits are enforced by
 * `installIsolatedKernelSpec()`, which refuses (`IsolationUnavailableError`, reason `limit-unenforceable`) a limit
 * nothing on the machine can enforce. Throws `InvalidOptionsError` for a malformed field (its path, e.g.
 * `memoryBytes`), and `IsolationPolicyError` like `createReadIsolationPolicy()`.
 */
export function createKernelPolicy(opts: KernelPolicyOptions): IsolationPolicy {
  validate(opts, false, 'kernel policy');
  return buildPolicy({ ...opts, roots: opts.roots ?? [] });
}

function buildPolicy(opts: ReadIsolationPolicyOptions): IsolationPolicy {
  const tempDir = canonicalTempDir(opts.tempDir);
  const roots = opts.roots.map((r) => ({ label: r.label, path: canonicalDirectory(r) }));
  for (const root of roots) {
    if (root.path === '/') {
      throw new IsolationPolicyError(`${root.label} cannot be isolated: it is the filesystem root`, {
        path: root.path,
      });
    }
  }
  for (let i = 0; i < roots.length; i++) {
    for (let j = i + 1; j < roots.length; j++) {
      const a = roots[i]!;
      const b = roots[j]!;
      if (overlaps(a.path, b.path)) {
        throw new IsolationPolicyError(
          `${a.label} (${a.path}) and ${b.label} (${b.path}) must not overlap: hide the outer one only`,
          { path: b.path },
        );
      }
    }
  }
  for (const root of roots) {
    if (overlaps(root.path, tempDir)) {
      throw new IsolationPolicyError(
        `${root.label} (${root.path}) must not overlap the canonical system temporary directory (${tempDir}): ` +
          'every kernel gets a private temporary directory instead',
        { path: root.path },
      );
    }
  }
  const allowed: string[] = [];
  for (const entry of opts.allowedRoots ?? []) {
    const path = canonicalDirectory(entry);
    for (const root of roots) {
      if (isWithin(root.path, path)) {
        throw new IsolationPolicyError(
          `${entry.label} (${path}) must not contain the hidden ${root.label} (${root.path})`,
          { path },
        );
      }
    }
    if (!allowed.includes(path)) allowed.push(path);
  }
  return Object.freeze({
    roots: Object.freeze(roots.map((r) => r.path)),
    allowedRoots: Object.freeze(allowed),
    tempDir,
    ...requestedLimits(opts),
  });
}
