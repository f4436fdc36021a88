import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InvalidOptionsError } from '@kernelwarden/core';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { wrapCommand } from './bubblewrap.js';
import { IsolationUnavailableError } from './errors.js';
import { runProcess } from './subprocess.js';

const policy = {
  roots: ['/srv/data', '/srv/users'],
  allowedRoots: ['/srv/data/sessions/s1/inputs', '/srv/users/alice'],
  tempDir: '/tmp',
};

function mountOrder(argv: string[]): string[] {
  const ops: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--tmpfs') ops.push(`tmpfs ${argv[i + 1]}`);
    if (a === '--ro-bind' && argv[i + 1] !== '/') ops.push(`ro ${argv[i + 1]}`);
    if (a === '--bind') ops.push(`rw ${argv[i + 1]}`);
  }
  return ops;
}

describe('wrapCommand', () => {
  it('keeps SIGINT from bwrap and gives it back to the command, dies with its parent, and never starts a new session', () => {
    const argv = wrapCommand(policy, ['python3', '-m', 'ipykernel_launcher'], { workspace: '/srv/work/ws' });
    expect(argv.slice(0, 3)).toEqual(['/usr/bin/env', '--ignore-signal=INT', 'bwrap']);
    const sep = argv.indexOf('--');
    expect(argv.slice(sep)).toEqual([
      '--',
      '/usr/bin/env',
      '--default-signal=INT',
      'python3',
      '-m',
      'ipykernel_launcher',
    ]);
    expect(argv).toContain('--die-with-parent');
    expect(argv).toContain('--unshare-pid');
    expect(argv).not.toContain('--new-session');
    expect(argv.join(' ')).toContain('--ro-bind / / --dev /dev --proc /proc');
  });

  it('runs every command in its own user namespace with every capability dropped, before any mount', () => {
    const argv = wrapCommand(policy, ['true'], { workspace: '/srv/work/ws' });
    const firstMount = argv.indexOf('--ro-bind');
    expect(argv.slice(3, firstMount)).toEqual([
      '--unshare-user',
      '--cap-drop',
      'ALL',
      '--die-with-parent',
      '--unshare-pid',
      '--unshare-ipc',
    ]);
    expect(argv).not.toContain('--cap-add');
  });

  it('pins every directory between a writable bind and a mount below it, and none inside hidden or read-only ones', () => {
    const argv = wrapCommand(
      {
        roots: ['/srv/ws/a/b/secret', '/srv/data'],
        allowedRoots: ['/srv/data/p/q/in', '/srv/ws/x/y/shared'],
        tempDir: '/tmp',
      },
      ['true'],
      { workspace: '/srv/ws', readWrite: ['/srv/ws/a/out/rw'], readOnly: ['/srv/ws/x/y/shared/ro/file'] },
    );
    expect(mountOrder(argv)).toEqual([
      'tmpfs /tmp',
      'tmpfs /srv/data',
      'rw /srv/ws',
      'rw /srv/ws/a',
      'rw /srv/ws/x',
      'rw /srv/ws/a/b',
      'rw /srv/ws/x/y',
      'rw /srv/ws/a/out',
      'tmpfs /srv/ws/a/b/secret',
      'ro /srv/data/p/q/in',
      'ro /srv/ws/x/y/shared',
      'rw /srv/ws/a/out/rw',
      'ro /srv/ws/x/y/shared/ro/file',
    ]);
    // Each pin is the directory bound onto itself: the sandbox sees what it saw, but cannot rename it.
    const i = argv.indexOf('/srv/ws/a');
    expect(argv.slice(i - 1, i + 2)).toEqual(['--bind', '/srv/ws/a', '/srv/ws/a']);
  });

  it('mounts parents before children so the most specific rule wins', () => {
    const argv = wrapCommand(
      { roots: ['/srv/ws/secret', '/srv/data'], allowedRoots: ['/srv/data/in'], tempDir: '/tmp' },
      ['true'],
      { workspace: '/srv/ws' },
    );
    expect(mountOrder(argv)).toEqual([
      'tmpfs /tmp',
      'tmpfs /srv/data',
      'rw /srv/ws',
      'tmpfs /srv/ws/secret',
      'ro /srv/data/in',
    ]);
    const remount = argv.flatMap((a, i) => (a === '--remount-ro' ? [argv[i + 1]] : []));
    expect(remount).toEqual(['/srv/ws/secret', '/srv/data']);
  });

  it('hides the connection file directory last and binds the file alone back', () => {
    const argv = wrapCommand(policy, ['true'], {
      workspace: '/srv/work/ws',
      connectionFile: '/srv/state/runtime/kernel-1.json',
    });
    expect(mountOrder(argv).slice(-2)).toEqual(['tmpfs /srv/state/runtime', 'rw /srv/state/runtime/kernel-1.json']);
  });

  it('unsets gateway credentials and points TMPDIR at the private temp', () => {
    const argv = wrapCommand({ ...policy, tempDir: '/var/tmp/sys' }, ['true'], { workspace: '/srv/ws' }).join(' ');
    expect(argv).toContain('--unsetenv JUPYTER_TOKEN');
    expect(argv).toContain('--unsetenv JPY_PARENT_PID');
    expect(argv).toContain('--tmpfs /var/tmp/sys');
    expect(argv).toContain('--tmpfs /tmp');
    expect(argv).toContain('--setenv TMPDIR /var/tmp/sys');
    expect(argv).toContain('--chdir /srv/ws');
  });

  it('names the bad field of malformed input', () => {
    try {
      wrapCommand(policy, ['true'], { workspace: 'relative' });
      expect.unreachable();
    } catch (error) {
      expect(InvalidOptionsError.isInstance(error)).toBe(true);
      expect((error as InvalidOptionsError).path).toBe('workspace');
    }
    expect(() => wrapCommand({ roots: ['/'], allowedRoots: [] }, ['true'], { workspace: '/srv/ws' })).toThrow(
      /policy\.roots\.0/,
    );
    expect(() => wrapCommand(policy, [], { workspace: '/srv/ws' })).toThrow(/argv/);
  });
});

describe('wrapCommand with limits', () => {
  const limitsOnly = { roots: [], allowedRoots: [], tempDir: '/tmp' };

  it('keeps the host filesystem read-only for a policy without hidden roots too, with a private temp and the devices given', () => {
    const argv = wrapCommand(limitsOnly, ['true'], {
      workspace: '/srv/ws',
      hide: ['/srv/state'],
      devices: ['/dev/nvidia0', '/dev/dri/renderD128'],
    });
    const joined = argv.join(' ');
    expect(joined).toContain(
      '--unshare-ipc --ro-bind / / --dev /dev --proc /proc --dev-bind /dev/nvidia0 /dev/nvidia0 --dev-bind /dev/dri/renderD128 /dev/dri/renderD128',
    );
    expect(joined).not.toContain('--bind / /');
    expect(joined).toContain('--setenv TMPDIR /tmp');
    expect(mountOrder(argv)).toEqual(['tmpfs /tmp', 'tmpfs /srv/state', 'rw /srv/ws']);
  });

  it('cuts the network off with a namespace of its own for network: false, and only then', () => {
    expect(wrapCommand({ ...policy, network: false }, ['true'], { workspace: '/srv/work/ws' })).toContain(
      '--unshare-net',
    );
    expect(wrapCommand({ ...policy, network: true }, ['true'], { workspace: '/srv/work/ws' })).not.toContain(
      '--unshare-net',
    );
  });

  it('refuses the limits only the kernelspec launcher can set up, naming the limit', () => {
    for (const [limit, value] of [
      ['memoryBytes', 1 << 30],
      ['maxProcesses', 64],
      ['cpuSeconds', 10],
    ] as const) {
      try {
        wrapCommand({ ...limitsOnly, [limit]: value }, ['true'], { workspace: '/srv/ws' });
        expect.unreachable();
      } catch (error) {
        expect(IsolationUnavailableError.isInstance(error)).toBe(true);
        expect((error as IsolationUnavailableError).limit).toBe(limit);
        expect((error as IsolationUnavailableError).reason).toBe('limit-unenforceable');
      }
    }
    expect(() => wrapCommand({ ...limitsOnly, memoryBytes: -1 }, ['true'], { workspace: '/srv/ws' })).toThrow(
      /policy\.memoryBytes/,
    );
  });
});

describe('wrapCommand under real bubblewrap', () => {
  let base: string;
  beforeEach(() => {
    base = realpathSync(mkdtempSync(join(tmpdir(), 'kw-wrap-')));
  });
  afterEach(() => rmSync(base, { recursive: true, force: true }));

  it('gives the command a private /tmp by default', async () => {
    const ws = join(base, 'ws');
    const hidden = join(base, 'hidden');
    mkdirSync(ws);
    mkdirSync(hidden);
    writeFileSync(join(base, 'host-file'), 'x');
    const argv = wrapCommand({ roots: [hidden], allowedRoots: [] }, ['/bin/sh', '-c', 'ls -A /tmp; echo "T=$TMPDIR"'], {
      workspace: ws,
    });
    const result = await runProcess(argv, { timeoutMs: 20_000 });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    // /tmp holds only the way to the workspace (bound back), nothing else of the host's /tmp.
    expect(result.stdout.trim().split('\n')).toEqual([base.split('/')[2], 'T=/tmp']);
  });

  it('lets a limits-only command write only its workspace and private temp, not the host, and see only loopback without network', async () => {
    const ws = join(base, 'ws');
    mkdirSync(ws);
    const hostFile = join('/var/tmp', `kw-wrap-${process.pid}-${Date.now()}`);
    const script = [
      `echo written > ${hostFile} 2>/dev/null && echo HOST-WRITTEN`,
      `echo written > ${join(base, 'outside.txt')} 2>/dev/null`,
      `echo written > ${join(ws, 'mine.txt')} && echo WORKSPACE-WRITTEN`,
      'mkdir /sys/fs/cgroup/kw-escape 2>/dev/null && echo CGROUP-WRITTEN',
      "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '",
    ].join('\n');
    const argv = wrapCommand({ roots: [], allowedRoots: [], network: false }, ['/bin/sh', '-c', script], {
      workspace: ws,
    });
    try {
      const result = await runProcess(argv, { timeoutMs: 20_000 });
      expect(result.code).toBe(0);
      expect(result.stdout.trim().split('\n')).toEqual(['WORKSPACE-WRITTEN', 'lo']);
      expect(existsSync(hostFile)).toBe(false);
      // What it wrote beside its workspace, in the system temporary directory, went to its private one.
      expect(readdirSync(base).sort()).toEqual(['ws']);
      expect(readdirSync(ws)).toEqual(['mine.txt']);
    } finally {
      rmSync(hostFile, { force: true });
    }
  });

  it('holds no capability and cannot unmount, rename or remove what hides a directory inside its workspace', async () => {
    const ws = join(base, 'ws');
    const secret = join(ws, 'sub', 'secret');
    mkdirSync(secret, { recursive: true });
    writeFileSync(join(secret, 'data.txt'), 'TOP-SECRET');
    const script = [
      'grep -E "^Cap(Inh|Prm|Eff|Bnd|Amb):" /proc/self/status',
      `umount ${secret} 2>/dev/null && echo UNMOUNTED`,
      `umount -l ${secret} 2>/dev/null && echo UNMOUNTED`,
      `mv ${join(ws, 'sub')} ${join(ws, 'moved')} 2>/dev/null && echo MOVED`,
      `mv ${secret} ${join(ws, 'sub', 'other')} 2>/dev/null && echo MOVED`,
      `rmdir ${secret} 2>/dev/null && echo REMOVED`,
      `cat ${join(secret, 'data.txt')} ${join(ws, 'moved', 'secret', 'data.txt')} 2>/dev/null`,
      'echo done',
    ].join('\n');
    const argv = wrapCommand({ roots: [secret], allowedRoots: [] }, ['/bin/sh', '-c', script], { workspace: ws });
    const result = await runProcess(argv, { timeoutMs: 20_000 });
    expect(result.code).toBe(0);
    const lines = result.stdout.trim().split('\n');
    expect(lines.filter((l) => l.startsWith('Cap'))).toEqual(
      ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb'].map((k) => `${k}:\t0000000000000000`),
    );
    expect(lines.filter((l) => !l.startsWith('Cap'))).toEqual(['done']);
    expect(readdirSync(join(ws, 'sub'))).toEqual(['secret']);
  });

  it('delivers SIGINT sent to the process group to the command, which survives it; bwrap survives too', async () => {
    const ws = join(base, 'ws');
    const hidden = join(base, 'hidden');
    mkdirSync(ws);
    mkdirSync(hidden);
    const script = [
      'import signal, sys, time',
      'try:',
      '    print("ready", flush=True)',
      '    time.sleep(30)',
      'except KeyboardInterrupt:',
      '    print("interrupted", flush=True)',
      'print("still alive", flush=True)',
    ].join('\n');
    const argv = wrapCommand({ roots: [hidden], allowedRoots: [] }, ['/usr/bin/python3', '-c', script], {
      workspace: ws,
    });
    const child = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const ready = new Promise<void>((resolve) =>
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('ready')) resolve();
      }),
    );
    const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
    try {
      await ready;
      process.kill(-child.pid!, 'SIGINT');
      expect(await exited).toBe(0);
      expect(out).toContain('interrupted');
      expect(out).toContain('still alive');
    } finally {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // gone
      }
    }
  });
});

describe('wrapCommand mount order (property)', () => {
  it('never mounts a directory after one of its descendants, whatever the mix of roots, allowed roots and binds', () => {
    const segment = fc.constantFrom('a', 'b', 'c');
    const path = fc.array(segment, { minLength: 1, maxLength: 4 }).map((parts) => `/${parts.join('/')}`);
    fc.assert(
      fc.property(
        fc.uniqueArray(path, { minLength: 1, maxLength: 4 }),
        fc.array(path, { maxLength: 4 }),
        path,
        fc.array(path, { maxLength: 2 }),
        (roots, allowedRoots, workspace, readWrite) => {
          const argv = wrapCommand({ roots, allowedRoots, tempDir: '/tmp' }, ['true'], { workspace, readWrite });
          const mounted: string[] = [];
          for (let i = 0; i < argv.length; i++) {
            const a = argv[i];
            if (a === '--tmpfs' || a === '--bind' || (a === '--ro-bind' && argv[i + 1] !== '/'))
              mounted.push(argv[i + 1]!);
            if (a === '--') break;
          }
          mounted.forEach((later, j) => {
            for (const earlier of mounted.slice(0, j)) {
              expect(earlier !== later && earlier.startsWith(`${later}/`)).toBe(false);
            }
          });
        },
      ),
      { numRuns: 300 },
    );
  });
});
