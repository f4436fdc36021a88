import { spawn } from 'node:child_process';
import { abortScope } from '@kernelwarden/core';

/** How a short helper process ended. */
export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a short helper command (a sandbox check, a probe) to completion, capturing its output (capped at 64 KiB).
 * Aborting or running out of time kills its whole process group and rejects with the signal's reason or a
 * `TimeoutError`.
 */
export async function runProcess(
  argv: readonly string[],
  opts: { signal?: AbortSignal; timeoutMs?: number; env?: NodeJS.ProcessEnv; timeoutMessage?: string } = {},
): Promise<RunResult> {
  const scope = abortScope({ signal: opts.signal, timeoutMs: opts.timeoutMs, timeoutMessage: opts.timeoutMessage });
  try {
    scope.throwIfAborted();
    const [command, ...args] = argv;
    const child = spawn(command!, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      env: absolutePath(opts.env ?? process.env),
    });
    const cap = 64 * 1024;
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      if (stdout.length < cap) stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      if (stderr.length < cap) stderr += chunk;
    });
    const done = new Promise<RunResult>((resolve) => {
      child.once('error', (error) => resolve({ code: null, signal: null, stdout, stderr: stderr + String(error) }));
      child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
    });
    try {
      return await scope.race(done);
    } catch (error) {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
      await done;
      throw error;
    }
  } finally {
    scope.dispose();
  }
}

/**
 * `env` with only the absolute entries of its `PATH`: an empty or relative entry (`PATH=:$PATH`, `.`) names the
 * directory a command runs in — a sandbox's workspace — where a kernel could have left a `python3` or `umount` for
 * the probe to run in place of the real one.
 */
function absolutePath(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  if (env.PATH === undefined) return env;
  return {
    ...env,
    PATH: env.PATH.split(':')
      .filter((dir) => dir.startsWith('/'))
      .join(':'),
  };
}
