import { lstatSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidOptionsError } from '@kernelwarden/core';
import { IsolationPolicyError } from './errors.js';
import { inspectPath, isAbsolutePath, overlaps } from './paths.js';
import {
  canonicalDirectory,
  canonicalTempDir,
  createReadIsolationPolicy,
  type IsolationPolicy,
  type LabelledPath,
} from './policy.js';

/** An external data root: a path (writable) or `{ path, readOnly }`. */
export type TeamDataRoot = string | { path: string; readOnly?: boolean };

/**
 * Options of `teamReadPolicy()`. The directory layout it assumes:
 *
 * ```
 * <dataDir>/                                      hidden (the server's own state, every session, every workspace)
 * <dataDir>/sessions/<sessionId>/artifact-inputs  readable again: inputs handed to this session's kernels
 * <dataRoot>/users/                               hidden, for each writable data root
 * <dataRoot>/users/<owner>/                       readable again: the session owner's personal data
 * projectSidecars[currentProject][i]              readable again: the current project's sidecar folders
 * ```
 */
export interface TeamReadPolicyOptions {
  /** The server's data directory; hidden as a whole. */
  dataDir: string;
  /** External data roots. A writable one's `users` namespace is hidden; a `readOnly` one is left readable. @defaultValue [] */
  dataRoots?: readonly TeamDataRoot[];
  /** The session owner's user name: `<dataRoot>/users/<owner>` stays readable. */
  owner: string;
  /** The session id: `<dataDir>/sessions/<sessionId>/artifact-inputs` stays readable. */
  sessionId: string;
  /** Sidecar folders by project id; only `currentProject`'s are made readable. @defaultValue {} */
  projectSidecars?: Readonly<Record<string, readonly string[]>>;
  /** The project the session works in. */
  currentProject: string;
  /** The system temporary directory roots are checked against. @defaultValue the canonical `os.tmpdir()` */
  tempDir?: string;
}

const SEGMENT = /^(?!\.{1,2}$)[A-Za-z0-9._@-]+$/;

/** `<dataDir>/sessions/<sessionId>/artifact-inputs`: where a session's artifact inputs live. */
export function artifactInputDir(dataDir: string, sessionId: string): string {
  return join(dataDir, 'sessions', sessionId, 'artifact-inputs');
}

function validate(opts: TeamReadPolicyOptions): void {
  const issues: { path: string; message: string }[] = [];
  if (!isAbsolutePath(opts?.dataDir)) issues.push({ path: 'dataDir', message: 'expected an absolute path' });
  for (const key of ['owner', 'sessionId', 'currentProject'] as const) {
    if (typeof opts?.[key] !== 'string' || !SEGMENT.test(opts[key]))
      issues.push({ path: key, message: 'expected a single path segment ([A-Za-z0-9._@-], not "." or "..")' });
  }
  (opts?.dataRoots ?? []).forEach((root, i) => {
    const path = typeof root === 'string' ? root : root?.path;
    if (!isAbsolutePath(path)) issues.push({ path: `dataRoots.${i}`, message: 'expected an absolute path' });
  });
  for (const [project, dirs] of Object.entries(opts?.projectSidecars ?? {})) {
    if (!Array.isArray(dirs)) {
      issues.push({ path: `projectSidecars.${project}`, message: 'expected an array of absolute paths' });
      continue;
    }
    dirs.forEach((dir, i) => {
      if (!isAbsolutePath(dir))
        issues.push({ path: `projectSidecars.${project}.${i}`, message: 'expected an absolute path' });
    });
  }
  if (issues.length > 0) throw new InvalidOptionsError(issues, { subject: 'team read policy' });
}

/** An allowed directory that may not exist yet: missing is fine (it stays hidden), a symbolic link is refused. */
function optionalAllowed(entry: LabelledPath): LabelledPath | undefined {
  const found = inspectPath(entry.path);
  if (found.kind === 'missing') return undefined;
  return { label: entry.label, path: canonicalDirectory(entry) };
}

/**
 * The team-mode read policy as a ready recipe: hides the data directory and each writable data root's `users`
 * namespace; lets the kernel read the owner's `users/<owner>`, the session's artifact inputs and the current
 * project's sidecar folders (never another project's). See `TeamReadPolicyOptions` for the layout.
 *
 * Use it for every kernel a team session launches. Pure: it reads the disk and creates nothing (run
 * `prepareTeamDirectories()` first to create the layout). Allowed folders that do not exist yet are left out
 * (they stay hidden); hidden ones must exist. Throws `IsolationPolicyError` ("team personal-data namespace cannot
 * be isolated", "team kernel Artifact input scope cannot be isolated", "must not overlap", "must not overlap the
 * canonical system temporary directory").
 */
export function teamReadPolicy(opts: TeamReadPolicyOptions): IsolationPolicy {
  validate(opts);
  const tempDir = canonicalTempDir(opts.tempDir);
  const dataDir = canonicalDirectory({ path: opts.dataDir, label: 'team data directory' });
  const roots: LabelledPath[] = [{ path: dataDir, label: 'team data directory' }];
  const allowed: LabelledPath[] = [];
  for (const entry of opts.dataRoots ?? []) {
    const rootPath = typeof entry === 'string' ? entry : entry.path;
    if (typeof entry !== 'string' && entry.readOnly) continue;
    const dataRoot = canonicalDirectory({ path: rootPath, label: 'team data root' });
    if (overlaps(dataRoot, dataDir)) {
      throw new IsolationPolicyError(`team data root (${dataRoot}) must not overlap the data directory (${dataDir})`, {
        path: dataRoot,
      });
    }
    if (overlaps(dataRoot, tempDir)) {
      throw new IsolationPolicyError(
        `team data root (${dataRoot}) must not overlap the canonical system temporary directory (${tempDir})`,
        { path: dataRoot },
      );
    }
    const users = canonicalDirectory({ path: join(dataRoot, 'users'), label: 'team personal-data namespace' });
    roots.push({ path: users, label: 'team personal-data namespace' });
    const personal = optionalAllowed({ path: join(users, opts.owner), label: 'team personal-data area' });
    if (personal) allowed.push(personal);
  }
  const inputs = optionalAllowed({
    path: artifactInputDir(dataDir, opts.sessionId),
    label: 'team kernel Artifact input scope',
  });
  if (inputs) allowed.push(inputs);
  for (const dir of opts.projectSidecars?.[opts.currentProject] ?? []) {
    const sidecar = optionalAllowed({ path: dir, label: `team kernel Skill sidecar scope (${opts.currentProject})` });
    if (sidecar) allowed.push(sidecar);
  }
  return createReadIsolationPolicy({ roots, allowedRoots: allowed, tempDir });
}

function makePrivateDir(path: string, label: string): void {
  try {
    mkdirSync(path, { mode: 0o700 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const stat = lstatSync(path);
  if (stat.isSymbolicLink() || !stat.isDirectory()) {
    throw new IsolationPolicyError(`${label} cannot be isolated: ${path} is not a real directory`, { path });
  }
}

/**
 * Creates the directories `teamReadPolicy()` expects (mode 0700, one level at a time, refusing symbolic links):
 * each writable data root's `users/` and `users/<owner>/`, and the session's artifact-input folder.
 *
 * Use it once before computing the team policy of a new session; the policy computation itself writes nothing.
 */
export function prepareTeamDirectories(
  opts: Pick<TeamReadPolicyOptions, 'dataDir' | 'dataRoots' | 'owner' | 'sessionId'>,
): void {
  validate({ ...opts, currentProject: 'x' });
  const dataDir = canonicalDirectory({ path: opts.dataDir, label: 'team data directory' });
  let current = dataDir;
  for (const part of ['sessions', opts.sessionId, 'artifact-inputs']) {
    current = join(current, part);
    makePrivateDir(current, 'team kernel Artifact input scope');
  }
  for (const entry of opts.dataRoots ?? []) {
    if (typeof entry !== 'string' && entry.readOnly) continue;
    const dataRoot = canonicalDirectory({
      path: typeof entry === 'string' ? entry : entry.path,
      label: 'team data root',
    });
    makePrivateDir(join(dataRoot, 'users'), 'team personal-data namespace');
    makePrivateDir(join(dataRoot, 'users', opts.owner), 'team personal-data area');
  }
}
