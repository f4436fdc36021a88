import {
  chmodSync,
  chownSync,
  lchownSync,
  mkdirSync,
  mkdtempSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { canonicalPrivatePath, unsafeDirectoryReason, unsafeFileReason } from './state-dir.js';

const made: string[] = [];
function dir(): string {
  const d = mkdtempSync(join(tmpdir(), 'kw-state-dir-test-'));
  made.push(d);
  return d;
}
afterEach(() => {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('unsafeDirectoryReason', () => {
  it('accepts a 0700 directory of ours below a sticky world-writable one (the system temp)', () => {
    const d = join(dir(), 'state');
    mkdirSync(d, { mode: 0o700 });
    expect(unsafeDirectoryReason(d)).toBeUndefined();
  });

  it('refuses one other users can enter, and one below a directory others can write to', () => {
    const base = dir();
    const open = join(base, 'open');
    mkdirSync(open, { mode: 0o700 });
    chmodSync(open, 0o755);
    expect(unsafeDirectoryReason(open)).toMatch(/accessible to other users \(mode 755\)/);
    chmodSync(base, 0o777);
    const inner = join(base, 'inner');
    mkdirSync(inner, { mode: 0o700 });
    expect(unsafeDirectoryReason(inner)).toMatch(/writable by other users \(mode 777\)/);
  });

  it('refuses one owned by another uid', () => {
    const d = dir();
    expect(unsafeDirectoryReason(d, (process.getuid?.() ?? 0) + 1)).toMatch(/belongs to uid/);
  });
});

describe('unsafeFileReason', () => {
  it('accepts a 0600 file and refuses a readable one, a symlink and a missing one', () => {
    const d = dir();
    const file = join(d, 'f');
    writeFileSync(file, 'x', { mode: 0o600 });
    expect(unsafeFileReason(file)).toBeUndefined();
    chmodSync(file, 0o644);
    expect(unsafeFileReason(file)).toMatch(/accessible to other users/);
    symlinkSync(file, join(d, 'link'));
    expect(unsafeFileReason(join(d, 'link'))).toMatch(/not a regular file/);
    expect(unsafeFileReason(join(d, 'missing'))).toMatch(/cannot be read/);
  });
});

describe('canonicalPrivatePath', () => {
  it('follows links of this user (relative, absolute, through ..) to the canonical path, missing tail included', () => {
    const base = realpathSync(dir());
    mkdirSync(join(base, 'real', 'deep'), { recursive: true });
    symlinkSync('real/deep', join(base, 'relative'));
    symlinkSync(join(base, 'relative'), join(base, 'absolute'));
    symlinkSync('../../real', join(base, 'real', 'deep', 'up'));
    expect(canonicalPrivatePath(join(base, 'absolute', 'up', 'deep', 'state', 'gateway'))).toEqual({
      path: join(base, 'real', 'deep', 'state', 'gateway'),
    });
  });

  it('refuses a way through a directory or link of another user, or a directory others can write to', () => {
    const base = realpathSync(dir());
    const theirs = join(base, 'theirs');
    mkdirSync(join(base, 'mine'));
    mkdirSync(theirs);
    symlinkSync(join(base, 'mine'), join(theirs, 'st'));
    expect(canonicalPrivatePath(join(theirs, 'st')).path).toBe(join(base, 'mine'));
    // The directory, then only the link, of another uid (chown needs root, as the CI runs).
    chownSync(theirs, 4242, -1);
    expect(canonicalPrivatePath(join(theirs, 'st')).reason).toBe(
      `${theirs} belongs to uid 4242, another user, who could replace what lies below it`,
    );
    chownSync(theirs, process.getuid?.() ?? 0, -1);
    lchownSync(join(theirs, 'st'), 4242, -1);
    expect(canonicalPrivatePath(join(theirs, 'st')).reason).toBe(
      `${join(theirs, 'st')} belongs to uid 4242, another user, who could replace what lies below it`,
    );
    lchownSync(join(theirs, 'st'), process.getuid?.() ?? 0, -1);
    chmodSync(theirs, 0o777);
    expect(canonicalPrivatePath(join(theirs, 'st')).reason).toBe(`${theirs} is writable by other users (mode 777)`);
    chmodSync(theirs, 0o1777);
    expect(canonicalPrivatePath(join(theirs, 'st')).path).toBe(join(base, 'mine'));
    writeFileSync(join(base, 'file'), '');
    expect(canonicalPrivatePath(join(base, 'file', 'x')).reason).toBe(`${join(base, 'file')} is not a directory`);
    symlinkSync('loop', join(base, 'loop'));
    expect(canonicalPrivatePath(join(base, 'loop')).reason).toMatch(/more than 40 symbolic links/);
  });
});
