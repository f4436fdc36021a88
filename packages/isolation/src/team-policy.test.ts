import { mkdirSync, mkdtempSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { IsolationPolicyError } from './errors.js';
import { artifactInputDir, prepareTeamDirectories, teamReadPolicy } from './team-policy.js';

let base: string;
let canonicalTemp: string;
let dataDir: string;

beforeEach(() => {
  base = realpathSync(mkdtempSync(join(tmpdir(), 'kw-team-')));
  canonicalTemp = join(base, 'canonical-temp');
  dataDir = join(base, 'daemon');
  mkdirSync(canonicalTemp);
  mkdirSync(dataDir);
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

function sidecar(project: string, name: string): string {
  const root = join(dataDir, 'projects', project, 'skills', name);
  mkdirSync(root, { recursive: true });
  writeFileSync(join(root, 'kernel.py'), 'VALUE = 1\n');
  return root;
}

describe('teamReadPolicy', () => {
  it('hides the data directory and the data root users namespace; allows owner, artifact inputs and only the current project sidecar', () => {
    const scratch = join(base, 'scratch');
    mkdirSync(join(scratch, 'users', 'alice'), { recursive: true });
    mkdirSync(join(scratch, 'users', 'bob'), { recursive: true });
    mkdirSync(artifactInputDir(dataDir, 'frame-team-owner'), { recursive: true });
    const current = sidecar('default', 'current-sidecar');
    const foreign = sidecar('foreign-project', 'foreign-sidecar');

    const policy = teamReadPolicy({
      dataDir,
      dataRoots: [scratch],
      owner: 'alice',
      sessionId: 'frame-team-owner',
      projectSidecars: { default: [current], 'foreign-project': [foreign] },
      currentProject: 'default',
      tempDir: canonicalTemp,
    });

    expect(new Set(policy.roots)).toEqual(new Set([dataDir, join(scratch, 'users')]));
    expect(policy.allowedRoots).toContain(join(scratch, 'users', 'alice'));
    expect(policy.allowedRoots).toContain(artifactInputDir(dataDir, 'frame-team-owner'));
    expect(policy.allowedRoots).toContain(current);
    expect(policy.allowedRoots).not.toContain(foreign);
    expect(policy.allowedRoots).not.toContain(join(scratch, 'users', 'bob'));
  });

  it('with no data roots hides just the data directory, and leaves out allowed folders that do not exist yet', () => {
    const policy = teamReadPolicy({
      dataDir,
      owner: 'alice',
      sessionId: 's1',
      currentProject: 'default',
      tempDir: canonicalTemp,
    });
    expect(policy.roots).toEqual([dataDir]);
    expect(policy.allowedRoots).toEqual([]);
  });

  it('skips read-only data roots (left readable by design)', () => {
    const shared = join(base, 'reference');
    mkdirSync(shared);
    const policy = teamReadPolicy({
      dataDir,
      dataRoots: [{ path: shared, readOnly: true }],
      owner: 'alice',
      sessionId: 's1',
      currentProject: 'default',
      tempDir: canonicalTemp,
    });
    expect(policy.roots).toEqual([dataDir]);
  });

  it('rejects a symlinked personal-data namespace, a data root in the data directory, and one in the system temp', () => {
    const scratch = join(base, 'scratch');
    const outside = join(base, 'outside-users');
    mkdirSync(scratch);
    mkdirSync(outside);
    symlinkSync(outside, join(scratch, 'users'));
    const common = { dataDir, owner: 'alice', sessionId: 'frame-team-symlink', currentProject: 'default' };
    const withRoot = (root: string) => () => teamReadPolicy({ ...common, dataRoots: [root], tempDir: canonicalTemp });

    expect(withRoot(scratch)).toThrow(IsolationPolicyError);
    expect(withRoot(scratch)).toThrow(/personal-data namespace cannot be isolated/);

    const nested = join(dataDir, 'nested-data-root');
    mkdirSync(join(nested, 'users'), { recursive: true });
    expect(withRoot(nested)).toThrow(/must not overlap/);

    const temporary = join(canonicalTemp, 'lab-root');
    mkdirSync(join(temporary, 'users'), { recursive: true });
    expect(withRoot(temporary)).toThrow(/must not overlap the canonical system temporary directory/);
  });

  it('rejects a symlinked artifact-input scope', () => {
    const outside = join(base, 'outside-artifact-inputs');
    mkdirSync(outside);
    const inputs = artifactInputDir(dataDir, 'frame-team-artifact-symlink');
    mkdirSync(join(inputs, '..'), { recursive: true });
    symlinkSync(outside, inputs);
    expect(() =>
      teamReadPolicy({
        dataDir,
        owner: 'alice',
        sessionId: 'frame-team-artifact-symlink',
        currentProject: 'default',
        tempDir: canonicalTemp,
      }),
    ).toThrow(/Artifact input scope cannot be isolated/);
  });

  it('refuses ids that are not a single path segment', () => {
    expect(() =>
      teamReadPolicy({ dataDir, owner: '../bob', sessionId: 's1', currentProject: 'default', tempDir: canonicalTemp }),
    ).toThrow(/owner/);
  });

  it('prepareTeamDirectories creates the private layout the policy expects', () => {
    const scratch = join(base, 'scratch');
    mkdirSync(scratch);
    prepareTeamDirectories({ dataDir, dataRoots: [scratch], owner: 'alice', sessionId: 's1' });
    expect(statSync(join(scratch, 'users', 'alice')).mode & 0o777).toBe(0o700);
    const policy = teamReadPolicy({
      dataDir,
      dataRoots: [scratch],
      owner: 'alice',
      sessionId: 's1',
      currentProject: 'default',
      tempDir: canonicalTemp,
    });
    expect(policy.allowedRoots).toEqual([join(scratch, 'users', 'alice'), artifactInputDir(dataDir, 's1')]);
  });
});
