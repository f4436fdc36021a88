import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { processesMentioning, testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, cliEnv, runCli, isolatedSpecs as specsUnder } from './cli-binary.test-fixture.js';

// `kernelwarden run --hide` end to end: the built binary, its embedded gateway (a state directory of this file's
// own), real bubblewrap. TMPDIR points at a directory of the test's, so "the system temporary directory" is one this
// file owns.

let root: string;
let stateDir: string;
let systmp: string;
let vault: string;

beforeAll(() => {
  root = join(testGateway().root, `cli-iso-${randomBytes(4).toString('hex')}`);
  stateDir = join(root, 'state');
  systmp = join(root, 'systmp');
  vault = join(root, 'vault');
  for (const dir of [stateDir, systmp, vault]) mkdirSync(dir, { recursive: true });
  writeFileSync(join(vault, 'secret.txt'), 'TOP-SECRET\n');
  writeFileSync(join(systmp, 'host-file.txt'), 'HOST TEMP\n');
});

afterAll(async () => {
  const stopped = await runCli(['gateway', 'stop'], { stateDir, cwd: root, env: { TMPDIR: systmp } });
  expect(stopped.code, stopped.stderr).toBe(0);
});

async function waitUntil(check: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 200));
  }
  return true;
}

function run(args: string[], cwd: string) {
  return runCli(['run', '--hide', vault, ...args], { stateDir, cwd, env: { TMPDIR: systmp } });
}

/** Every isolated kernelspec folder under the state directory (the embedded gateway's kernelspec directory). */
const isolatedSpecs = () => specsUnder(stateDir);

const probe = () =>
  [
    'import os',
    'try:',
    `    open(${JSON.stringify(join(vault, 'secret.txt'))}).read()`,
    "    print('LEAK')",
    'except OSError as e:',
    "    print('denied', type(e).__name__)",
    "open('made-by-kernel.txt', 'w').write('hello')",
    `print(sorted(os.listdir(${JSON.stringify(systmp)})))`,
    'print(os.getcwd())',
  ].join('\n');

describe('kernelwarden run --hide, from the system temporary directory and below it', () => {
  it('works from a directory below the system temporary directory: that directory is the workspace, the rest of it private', async () => {
    const work = join(systmp, 'work');
    mkdirSync(work);
    const ran = await run(['-c', probe()], work);
    expect(ran.code, ran.stderr).toBe(0);
    const [denied, listed, cwd] = ran.stdout.trim().split('\n');
    expect(denied).toBe('denied FileNotFoundError');
    // The kernel's own temporary files are in its private temp; the host's are not there.
    expect(listed).toContain("'work'");
    expect(listed).not.toContain('host-file.txt');
    expect(cwd).toBe(work);
    expect(readFileSync(join(work, 'made-by-kernel.txt'), 'utf8')).toBe('hello');
  });

  it('refuses to run from the system temporary directory itself with exit 2, naming it and what to do, before any kernel starts', async () => {
    const before = isolatedSpecs();
    const ran = await run(['-c', 'print(1)'], systmp);
    expect(ran.code).toBe(2);
    expect(ran.stdout).toBe('');
    expect(ran.stderr).toContain(
      `--hide: the working directory ${systmp} is the system temporary directory, and every isolated kernel gets a ` +
        "private, empty one of its own, so it cannot be the kernel's workspace too: run from a directory of its own " +
        `(mkdir ${join(systmp, 'work')} && cd ${join(systmp, 'work')}) or pass --cwd DIR`,
    );
    expect(isolatedSpecs()).toEqual(before);
  });
});

describe('kernelwarden run --hide leaves no isolated kernelspec behind', () => {
  it('removes the ones it installed when it ends', async () => {
    const work = join(root, 'work-clean');
    mkdirSync(work);
    const before = isolatedSpecs();
    const ran = await run(['-c', 'print(6 * 7)'], work);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout.trim()).toBe('42');
    expect(isolatedSpecs()).toEqual(before);
  });

  it('keeps the spec of a run that was killed while its kernel lives, and the next run removes it once that kernel is gone', async () => {
    const work = join(root, 'work-killed');
    mkdirSync(work);
    const marker = `kw-killed-${randomBytes(4).toString('hex')}`;
    const child = spawn(
      process.execPath,
      [BIN, 'run', '--hide', vault, '-c', `import time\nprint('${marker}', flush=True)\ntime.sleep(120)`],
      { cwd: work, env: cliEnv(stateDir, { TMPDIR: systmp }), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
    try {
      await new Promise<void>((resolve, reject) => {
        let out = '';
        child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
          out += chunk;
          if (out.includes(marker)) resolve();
        });
        child.once('close', (code) => reject(new Error(`the run ended (${code}) before its cell started`)));
      });
      const orphan = isolatedSpecs();
      expect(orphan).toHaveLength(1);
      child.kill('SIGKILL');
      await exited;
      // Its kernel (a sandbox whose command line names the workspace) still runs the cell: its spec stays.
      expect(processesMentioning(work).length).toBeGreaterThan(0);
      expect(isolatedSpecs()).toEqual(orphan);

      // The next run: the embedded gateway deletes the dead command's kernel, then the spec goes too.
      const next = await run(['-c', 'print(1)'], work);
      expect(next.code, next.stderr).toBe(0);
      expect(isolatedSpecs()).toEqual([]);
      expect(await waitUntil(() => processesMentioning(work).length === 0, 15_000)).toBe(true);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    }
  });
});

describe('kernelwarden run --hide with the warm pool on', () => {
  it('pools an isolated kernel per policy: the next run with the same policy claims it, and it is isolated as a cold one', async () => {
    const poolState = join(root, 'state-pool');
    const work = join(root, 'work-pooled');
    mkdirSync(poolState);
    mkdirSync(work);
    const env = { TMPDIR: systmp, KERNELWARDEN_POOL: '1' };
    const pooledRun = (cwd: string) =>
      runCli(['run', '--hide', vault, '-c', probe()], { stateDir: poolState, cwd, env });
    const status = async () => {
      const ran = await runCli(['gateway', 'status', '--json'], { stateDir: poolState, cwd: root, env });
      expect(ran.code, ran.stderr).toBe(0);
      return JSON.parse(ran.stdout) as {
        kernels: { id: string; name: string; pooled?: boolean; launch?: string; launchReason?: string }[];
        pool: Record<string, { wanted: number; ready: number }>;
      };
    };
    /** The ready pooled kernels of an isolated kernelspec, once there is one. */
    const pooledIsolated = async () => {
      let found: { id: string; name: string }[] = [];
      expect(
        await waitUntilAsync(async () => {
          found = (await status()).kernels.filter((k) => k.pooled && k.name.startsWith('kw-iso-'));
          return found.length > 0;
        }, 60_000),
      ).toBe(true);
      // An isolated kernel is never forked from a launcher: its command is the sandbox's, exec'd.
      for (const kernel of (await status()).kernels.filter((k) => k.name.startsWith('kw-iso-'))) {
        expect(kernel.launch).toBe('exec');
        expect(kernel.launchReason).toBeUndefined();
      }
      return found;
    };
    try {
      const first = await pooledRun(work);
      expect(first.code, first.stderr).toBe(0);
      expect(first.stdout.trim().split('\n')[0]).toBe('denied FileNotFoundError');
      // The spec is the server's now (it stays for the next run), and the pool keeps a started kernel of it.
      const specs = specsUnder(poolState);
      expect(specs, JSON.stringify(specs)).toHaveLength(1);
      const [ready] = await pooledIsolated();
      expect(ready?.name).toBe(specs[0]);
      expect((await status()).pool[specs[0]!]).toEqual({ wanted: 1, ready: 1 });

      // The same policy from the same directory: the run claims that kernel (gone from the pool and, once the run
      // ended, from the server), and it is as isolated as a cold one, in the run's own directory.
      const second = await pooledRun(work);
      expect(second.code, second.stderr).toBe(0);
      const [denied, listed, cwd] = second.stdout.trim().split('\n');
      expect(denied).toBe('denied FileNotFoundError');
      expect(listed).not.toContain('host-file.txt');
      expect(cwd).toBe(work);
      const after = await status();
      expect(after.kernels.map((k) => k.id)).not.toContain(ready?.id);
      expect(specsUnder(poolState)).toEqual(specs);
      // The pool starts the next one in the background.
      const [next] = await pooledIsolated();
      expect(next?.id).not.toBe(ready?.id);

      // Another policy (another workspace) gets a spec and a pool of its own; the first one's stays.
      const other = join(root, 'work-pooled-other');
      mkdirSync(other);
      const third = await pooledRun(other);
      expect(third.code, third.stderr).toBe(0);
      expect(specsUnder(poolState)).toHaveLength(2);
    } finally {
      const stopped = await runCli(['gateway', 'stop'], { stateDir: poolState, cwd: root, env });
      expect(stopped.code, stopped.stderr).toBe(0);
    }
    // With the server gone, nothing of its pool runs.
    expect(await waitUntil(() => processesMentioning(work).length === 0, 15_000)).toBe(true);
  });
});

async function waitUntilAsync(check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 250));
  }
  return true;
}
