import { chmodSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createOtherUser, type OtherUser } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installIsolatedKernelSpec } from './kernelspec.js';
import { detectLimits, type LimitSupport } from './limit-support.js';
import { createKernelPolicy } from './policy.js';

// The rlimit fallback, as an ordinary user where no cgroup is writable: the real launcher chain of a real kernelspec
// (launch check, prlimit, bwrap) run as a second, non-root uid made for this file. Limits then are RLIMIT_DATA and
// RLIMIT_NPROC, which Linux enforces for that uid (unlike root), inside bubblewrap's user namespace too.

const MiB = 1024 * 1024;
let user: OtherUser;
let base: string;
let support: LimitSupport;

beforeAll(async () => {
  user = createOtherUser();
  base = realpathSync(mkdtempSync(join(tmpdir(), 'kw-rlimits-')));
  chmodSync(base, 0o755);
  const real = await detectLimits();
  // This machine has writable cgroups (as root); the user the kernels run as here would not.
  support = {
    ...real,
    root: false,
    cgroups: { controllers: [], problems: { memory: 'not writable by this user', pids: 'not writable by this user' } },
  };
});

afterAll(async () => {
  await user?.[Symbol.asyncDispose]();
  if (base) rmSync(base, { recursive: true, force: true });
});

/** Installs a spec whose "kernel" is `script` under `limits`, and runs its command line as the other user. */
async function launchAsUser(name: string, limits: Parameters<typeof createKernelPolicy>[0], script: string) {
  const dir = (...parts: string[]) => {
    const path = join(base, name, ...parts);
    mkdirSync(path, { recursive: true, mode: 0o755 });
    chmodSync(path, 0o755);
    return path;
  };
  const ws = dir('ws');
  chmodSync(ws, 0o777);
  const kernelSpecDir = dir('kernels');
  const runtime = dir('runtime');
  const connectionFile = join(runtime, 'kernel-00000000-0000-4000-8000-000000000001.json');
  writeFileSync(connectionFile, '{}');
  chmodSync(connectionFile, 0o644);
  const spec = await installIsolatedKernelSpec({
    kernelSpecDir,
    baseSpec: {
      name: 'python3',
      argv: ['/usr/bin/python3', '-c', script, '{connection_file}'],
      display_name: 'Python 3',
      language: 'python',
    },
    policy: createKernelPolicy(limits),
    workspace: ws,
    hideStateDir: false,
    limitSupport: support,
  });
  const kernel = JSON.parse(readFileSync(join(kernelSpecDir, spec, 'kernel.json'), 'utf8'));
  // The spec folder is private to its installer; the launcher only needs its command line.
  const argv = (kernel.argv as string[]).map((a) => (a === '{connection_file}' ? connectionFile : a));
  return { mechanisms: kernel.metadata.kernelwarden.limits.mechanisms, run: await user.run(argv, 60_000) };
}

describe('limits without a writable cgroup, as a non-root user', () => {
  it('stops a subprocess storm with RLIMIT_NPROC and fails a 2 GB allocation with RLIMIT_DATA', async () => {
    const script = [
      'import subprocess',
      'procs, refused = [], 0',
      'for i in range(100):',
      '    try:',
      "        procs.append(subprocess.Popen(['sleep', '60']))",
      '    except OSError:',
      '        refused += 1',
      'for p in procs: p.kill()',
      'for p in procs: p.wait()',
      'try:',
      '    bytearray(2 << 30)',
      "    alloc = 'allocated'",
      'except MemoryError:',
      "    alloc = 'MemoryError'",
      'print(len(procs), refused, alloc)',
    ].join('\n');
    const { mechanisms, run } = await launchAsUser('storm', { memoryBytes: 512 * MiB, maxProcesses: 24 }, script);
    expect(mechanisms).toEqual({ memoryBytes: ['rlimit'], maxProcesses: ['rlimit'] });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const [started, refused, alloc] = run.stdout.trim().split(' ');
    // The sandbox's two processes and the interpreter count too: fewer than 24 sleeps started.
    expect(Number(started)).toBeLessThan(24);
    expect(Number(started) + Number(refused)).toBe(100);
    expect(alloc).toBe('MemoryError');
  });
});
