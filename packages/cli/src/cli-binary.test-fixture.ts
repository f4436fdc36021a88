import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { testGateway } from '@kernelwarden/test-env';

/** The built `kernelwarden` binary the integration tests drive. */
export const BIN = resolve(dirname(fileURLToPath(import.meta.url)), '../dist/bin.js');

/** What one run of the binary did. */
export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A private state directory (its own embedded gateway) and working directory under the test environment. */
export function cliDirs(prefix: string): { stateDir: string; workDir: string } {
  const root = testGateway().root;
  const id = randomBytes(4).toString('hex');
  const stateDir = join(root, `${prefix}-state-${id}`);
  const workDir = join(root, `${prefix}-work-${id}`);
  mkdirSync(stateDir, { recursive: true });
  mkdirSync(workDir, { recursive: true });
  return { stateDir, workDir };
}

/** The environment of the binary: the test's state directory, no inherited timeout or token. */
export function cliEnv(stateDir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, KERNELWARDEN_STATE_DIR: stateDir };
  delete env.KERNELWARDEN_CELL_TIMEOUT;
  delete env.KERNELWARDEN_GATEWAY_TOKEN;
  delete env.KERNELWARDEN_MAX_SOURCE_SIZE;
  return { ...env, ...extra };
}

/** Runs the built binary to its end, with `stdin` (bytes) as its standard input. */
export function runCli(
  args: string[],
  opts: { stateDir: string; cwd: string; stdin?: Buffer | string; env?: Record<string, string>; timeoutMs?: number },
): Promise<Ran> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: opts.cwd, env: cliEnv(opts.stateDir, opts.env) });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    // The binary may stop reading early (a source over the limit): a closed pipe is expected.
    child.stdin.on('error', () => {});
    child.stdin.end(opts.stdin ?? '');
    const killer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 90_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(killer);
      resolvePromise({ code, stdout, stderr });
    });
  });
}
