import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wrapCommand } from './bubblewrap.js';
import { IsolationUnavailableError } from './errors.js';
import { createReadIsolationPolicy, type IsolationPolicy } from './policy.js';
import { verifyIsolation } from './probe.js';
import { findExecutable } from './sandbox.js';
import { runProcess } from './subprocess.js';

// The sandbox as a real second, non-root uid made for this file (useradd) and removed after it (userdel): the same
// attacks as the hostile kernels', run through runuser. Needs root, as the suite runs here.

const user = `kwiso${randomBytes(3).toString('hex')}`;
let uid: number;
let base: string;
let ws: string;
let inner: string;
let vault: string;
let systmp: string;
let policy: IsolationPolicy;
let bin: string;
const bwrap = findExecutable('bwrap', process.env.PATH)!;

/** Every process of the test user, by pid (read from /proc): only ever processes this file started. */
function userPids(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = readFileSync(`/proc/${entry}/status`, 'utf8');
      if (new RegExp(`^Uid:\\s+${uid}\\s`, 'm').test(status)) pids.push(Number(entry));
    } catch {
      // gone
    }
  }
  return pids;
}

beforeAll(() => {
  execFileSync('useradd', ['--no-create-home', '--user-group', '--shell', '/usr/sbin/nologin', user]);
  uid = Number(execFileSync('id', ['-u', user], { encoding: 'utf8' }).trim());
  // Not under the suite's root directory, which is private to root: the user must reach its own workspace.
  base = realpathSync(mkdtempSync(join(tmpdir(), 'kw-iso-uid-')));
  chmodSync(base, 0o755);
  ws = join(base, 'ws');
  inner = join(ws, 'sub', 'secret');
  vault = join(base, 'vault');
  systmp = join(base, 'systmp');
  bin = join(base, 'bin');
  for (const dir of [inner, vault, systmp, bin]) mkdirSync(dir, { recursive: true });
  writeFileSync(join(inner, 'secret.txt'), 'TOP-SECRET-INNER\n', { mode: 0o644 });
  writeFileSync(join(vault, 'secret.txt'), 'TOP-SECRET-VAULT\n', { mode: 0o644 });
  writeFileSync(join(systmp, 'host-file.txt'), 'HOST TEMP\n', { mode: 0o644 });
  for (const path of [ws, join(ws, 'sub'), inner, vault, systmp]) chownSync(path, uid, uid);
  // A bwrap that runs the real one as the test user: what the probe starts then runs as that uid.
  writeFileSync(join(bin, 'bwrap'), `#!/bin/sh\nexec runuser -u ${user} -- ${bwrap} "$@"\n`, { mode: 0o755 });
  policy = createReadIsolationPolicy({
    roots: [
      { path: vault, label: 'vault' },
      { path: inner, label: 'inner secret' },
    ],
    tempDir: systmp,
  });
});

afterAll(() => {
  for (const pid of userPids()) process.kill(pid, 'SIGKILL');
  try {
    execFileSync('userdel', [user]);
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
  expect(() => execFileSync('id', [user], { stdio: 'ignore' })).toThrow();
});

describe('a sandbox run by a non-root uid', () => {
  it('can read the secrets without the sandbox (so the sandbox is what stops it)', async () => {
    const result = await runProcess(
      ['runuser', '-u', user, '--', 'cat', join(vault, 'secret.txt'), join(inner, 'secret.txt')],
      { timeoutMs: 20_000 },
    );
    expect(result.stdout).toBe('TOP-SECRET-VAULT\nTOP-SECRET-INNER\n');
  });

  it('holds no capability, cannot unmount, move or read what is hidden, even from a user namespace of its own', async () => {
    const targets = [vault, inner, systmp];
    const undo = targets.map((t) => `umount ${t} 2>/dev/null; umount -l ${t} 2>/dev/null`).join('; ');
    const umount2 =
      'import ctypes, sys\nl = ctypes.CDLL(None)\nfor p in sys.argv[1:]:\n    l.umount2(p.encode(), 0); l.umount2(p.encode(), 2)';
    const attempts = `${undo}; python3 -c '${umount2}' ${targets.join(' ')}`;
    const script = [
      'id -u',
      'grep -E "^Cap(Inh|Prm|Eff|Bnd|Amb):" /proc/self/status',
      attempts,
      `unshare --user --mount --keep-caps /bin/sh -c "${attempts.replaceAll('"', '\\"')}; cat ${join(inner, 'secret.txt')}" 2>/dev/null`,
      `mv ${join(ws, 'sub')} ${join(ws, 'moved')} 2>/dev/null && echo MOVED`,
      `cat ${join(vault, 'secret.txt')} ${join(inner, 'secret.txt')} 2>/dev/null`,
      `ls ${systmp}`,
      'echo end',
    ].join('\n');
    const argv = wrapCommand(policy, ['/bin/sh', '-c', script], { workspace: ws, privateTemp: [systmp] });
    const result = await runProcess(['runuser', '-u', user, '--', ...argv], { timeoutMs: 30_000 });
    expect(result.code, result.stderr).toBe(0);
    const lines = result.stdout.trim().split('\n');
    expect(lines[0]).toBe(String(uid));
    expect(lines.filter((l) => l.startsWith('Cap'))).toEqual(
      ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb'].map((k) => `${k}:\t0000000000000000`),
    );
    expect(result.stdout).not.toContain('TOP-SECRET');
    expect(result.stdout).not.toContain('MOVED');
    expect(result.stdout).not.toContain('host-file.txt');
    expect(lines.at(-1)).toBe('end');
    expect(readdirSync(ws)).toEqual(['sub']);
  });

  it('passes the isolation probe when its sandbox runs as that uid, and fails it when that sandbox keeps capabilities', async () => {
    const report = await verifyIsolation(policy, {
      workspace: ws,
      privateTemp: [systmp],
      searchPath: `${bin}:${process.env.PATH}`,
    });
    expect(report.checks).toContain('capabilities: none (effective, permitted, inheritable, ambient, bounding)');
    expect(report.checks).toContain('unmounting: refused (umount, umount2)');

    // The same user's sandbox, asked to keep its capabilities (in its own user namespace, as a non-root bwrap can).
    const leaky = join(base, 'leaky');
    mkdirSync(leaky);
    writeFileSync(
      join(leaky, 'bwrap'),
      [
        '#!/bin/sh',
        'for a do shift; if [ "$a" = --cap-drop ]; then set -- "$@" --cap-add; else set -- "$@" "$a"; fi; done',
        `exec runuser -u ${user} -- ${bwrap} "$@"`,
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
    const error = await verifyIsolation(policy, {
      workspace: ws,
      privateTemp: [systmp],
      searchPath: `${leaky}:${process.env.PATH}`,
    }).catch((e: unknown) => e);
    expect(IsolationUnavailableError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ reason: 'probe-failed' });
    // Holding capabilities is refused on its own: here they would not even let it unmount (its mounts belong to a
    // namespace those capabilities do not cover), but the probe does not count on that.
    expect((error as Error).message).toMatch(/the sandbox holds capabilities \(.*CapEff 0*[1-9a-f]/);
  });
});
