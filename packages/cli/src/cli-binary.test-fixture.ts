import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { type Dirent, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { testGateway } from '@kernelwarden/test-env';

/** The built `kernelwarden` binary the integration tests drive. */
export const BIN = resolve(dirname(fileURLToPath(import.meta.url)), '../dist/bin.cjs');

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

/**
 * Runs the built binary to its end, with `stdin` (bytes) as its standard input. With `program`, runs that instead,
 * with `args` alone (a wrapper that execs the binary itself), in the binary's environment.
 */
export function runCli(
  args: string[],
  opts: {
    stateDir: string;
    cwd: string;
    stdin?: Buffer | string;
    env?: Record<string, string>;
    timeoutMs?: number;
    program?: string;
  },
): Promise<Ran> {
  return new Promise((resolvePromise, reject) => {
    const [command, argv] = opts.program ? [opts.program, args] : [process.execPath, [BIN, ...args]];
    const child = spawn(command, argv, { cwd: opts.cwd, env: cliEnv(opts.stateDir, opts.env) });
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

/** The ids of every kernel the embedded gateway of `stateDir` ran: its per-kernel logs are `<kernel id>.log`. */
export function gatewayKernelIds(stateDir: string): string[] {
  const ids: string[] = [];
  for (const gateway of readdirSync(stateDir)) {
    try {
      for (const log of readdirSync(join(stateDir, gateway, 'kernel-logs'))) {
        if (log.endsWith('.log')) ids.push(log.slice(0, -'.log'.length));
      }
    } catch {
      // not a gateway directory
    }
  }
  return ids;
}

/**
 * The kernel cgroups (`kw-<16 hex of the kernelspec>-<kernel id>`, under any controller) still on this machine for the
 * kernels of `stateDir`'s gateway. Others' kernels, whose cgroups sit beside them, are not looked at.
 */
export function leftoverKernelCgroups(stateDir: string): string[] {
  const ids = new Set(gatewayKernelIds(stateDir));
  const left: string[] = [];
  const walk = (dir: string, depth: number) => {
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      if (!entry.isDirectory()) continue;
      const kernel = /^kw-[0-9a-f]{16}-([A-Za-z0-9-]+)$/.exec(entry.name);
      if (kernel) {
        if (ids.has(kernel[1]!)) left.push(join(dir, entry.name));
      } else if (depth < 6) {
        walk(join(dir, entry.name), depth + 1);
      }
    }
  };
  walk('/sys/fs/cgroup', 0);
  return left;
}

/** Every isolated kernelspec folder (`kw-iso-…`) under a state directory (the embedded gateway's kernelspecs). */
export function isolatedSpecs(stateDir: string): string[] {
  const found: string[] = [];
  const walk = (dir: string, level: number) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      // The warm pool's own directories (`pool/<kernelspec>/`) are named after the specs, not specs.
      if (entry.name === 'pool') continue;
      if (entry.name.startsWith('kw-iso-')) found.push(entry.name);
      else if (level < 3) walk(join(dir, entry.name), level + 1);
    }
  };
  walk(stateDir, 0);
  return found.sort();
}
