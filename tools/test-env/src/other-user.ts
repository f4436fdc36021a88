import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A real second local user made for a test: another uid on this machine, as an attacker would have. */
export interface OtherUser extends AsyncDisposable {
  readonly name: string;
  readonly uid: number;
  /** A directory every user can read (0755) where scripts for this user go. */
  readonly shared: string;
  /** Writes `text` into `shared` (0644) and returns its path. */
  file(name: string, text: string, mode?: number): string;
  /** Starts `argv` as this user (runuser), stdio piped. */
  spawn(argv: readonly string[]): ChildProcess;
  /** Runs `argv` as this user to its end. */
  run(argv: readonly string[], timeoutMs?: number): Promise<{ code: number | null; stdout: string; stderr: string }>;
}

/**
 * Creates a local user (`useradd`, no home, no login shell) for the test and removes it, with every process it
 * still runs, when disposed. Needs root (the CI runs as root); elsewhere it throws, it never skips.
 */
export function createOtherUser(): OtherUser {
  if (process.getuid?.() !== 0) throw new Error('a second local user can only be created as root (useradd)');
  const name = `kwx${randomBytes(4).toString('hex')}`;
  execFileSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', name]);
  const uid = Number(execFileSync('id', ['-u', name], { encoding: 'utf8' }).trim());
  const shared = mkdtempSync(join(tmpdir(), 'kw-other-user-'));
  chmodSync(shared, 0o755);
  const children = new Set<ChildProcess>();
  const spawnAs = (argv: readonly string[]) => {
    const child = spawn('runuser', ['-u', name, '--', ...argv], { stdio: ['pipe', 'pipe', 'pipe'], cwd: shared });
    children.add(child);
    child.once('exit', () => children.delete(child));
    return child;
  };
  return {
    name,
    uid,
    shared,
    file(fileName, text, mode = 0o644) {
      const path = join(shared, fileName);
      writeFileSync(path, text);
      chmodSync(path, mode);
      return path;
    },
    spawn: spawnAs,
    run(argv, timeoutMs = 30_000) {
      return new Promise((resolve) => {
        const child = spawnAs(argv);
        let stdout = '';
        let stderr = '';
        child.stdout?.on('data', (d: Buffer) => {
          stdout += d.toString();
        });
        child.stderr?.on('data', (d: Buffer) => {
          stderr += d.toString();
        });
        const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
        child.once('close', (code) => {
          clearTimeout(timer);
          resolve({ code, stdout, stderr });
        });
      });
    },
    async [Symbol.asyncDispose]() {
      for (const child of children) child.kill('SIGKILL');
      try {
        execFileSync('pkill', ['-KILL', '-u', name]);
      } catch {
        // no process left
      }
      for (let i = 0; i < 50; i++) {
        try {
          execFileSync('pgrep', ['-u', name]);
        } catch {
          break;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      execFileSync('userdel', [name]);
      rmSync(shared, { recursive: true, force: true });
    },
  };
}
