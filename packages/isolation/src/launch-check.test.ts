import {
  mkdirSync,
  mkdtempSync,
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
import { IsolationPolicyError } from './errors.js';
import { CONNECTION_MARK, LAUNCH_SCRIPT, launchCheckArguments, type PathRecord, recordPaths } from './launch-check.js';
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
function launch(record: PathRecord, connectionFile = join(base, 'runtime', 'kernel-1.json')) {
  return runProcess(
    [
      '/bin/sh',
      '-c',
      LAUNCH_SCRIPT,
      'kernelwarden-isolated-kernel',
      connectionFile,
      ...launchCheckArguments(stat, record),
      '/bin/sh',
      '-c',
      'printf "%s\\n" "$@"',
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
    expect(result.stdout.trim().split('\n')).toEqual([
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
