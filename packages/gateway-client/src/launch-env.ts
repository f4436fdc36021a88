import { userInfo } from 'node:os';
import { KernelEnvError } from './errors.js';

/** The longest value a create's `env` variable may have: Enterprise Gateway refuses a longer one (HTTP 400). */
export const MAX_ENV_VALUE_LENGTH = 4096;

/** Characters Enterprise Gateway refuses in a create's `env` values (`$`, backtick, CR, LF, NUL). */
const PROHIBITED_VALUE = /[$`\r\n\0]/;

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** True for a UUID version 4 in its canonical form (lowercase, hyphenated): what Enterprise Gateway accepts as `KERNEL_ID`. */
export function isUuidV4(id: unknown): id is string {
  return typeof id === 'string' && UUID_V4.test(id);
}

/**
 * The name sent as `KERNEL_USERNAME` when none is given: the OS user this process runs as (`os.userInfo()`), else
 * `$USER` / `$LOGNAME`, else `uid-<n>`.
 */
export function defaultKernelUsername(): string {
  try {
    const name = userInfo().username;
    if (name) return name;
  } catch {
    // No passwd entry for this uid (a container's arbitrary uid): fall through.
  }
  return process.env.USER || process.env.LOGNAME || `uid-${process.getuid?.() ?? 'unknown'}`;
}

/**
 * Checks a create's `env` against Enterprise Gateway's rules, on every gateway: each name non-empty without `=` or
 * NUL; each value a string of at most 4,096 characters without `$`, backtick, CR, LF or NUL. Throws `KernelEnvError`
 * naming the first bad variable (never its value).
 */
export function checkCreateEnv(env: Readonly<Record<string, unknown>>, subject: string): void {
  for (const [name, value] of Object.entries(env)) {
    const shown = clip(JSON.stringify(name));
    if (name === '' || name.includes('=') || name.includes('\0')) {
      throw new KernelEnvError(`${subject}: environment variable name ${shown} is not a valid name`, {
        variable: shown,
      });
    }
    if (typeof value !== 'string') {
      throw new KernelEnvError(`${subject}: environment variable ${shown} must be a string`, { variable: shown });
    }
    if (value.length > MAX_ENV_VALUE_LENGTH) {
      throw new KernelEnvError(
        `${subject}: environment variable ${shown} is ${value.length} characters long; Enterprise Gateway accepts at most ${MAX_ENV_VALUE_LENGTH}`,
        { variable: shown },
      );
    }
    if (PROHIBITED_VALUE.test(value)) {
      throw new KernelEnvError(
        `${subject}: environment variable ${shown} holds a character Enterprise Gateway refuses ($, backtick, CR, LF or NUL)`,
        { variable: shown },
      );
    }
  }
}

/**
 * The `env` of a create: the caller's variables, `KERNEL_USERNAME` (the caller's, else `username`), `KERNEL_ID` (the
 * create's id, also sent as `kernel_id`) and, when the create has a deadline, `KERNEL_LAUNCH_TIMEOUT` in whole
 * seconds (at least 1). Checked with `checkCreateEnv`; a caller's `KERNEL_ID` other than `kernelId` is refused.
 */
export function createEnv(opts: {
  env: Readonly<Record<string, string>> | undefined;
  kernelId: string;
  username: string;
  launchTimeoutMs: number | undefined;
  subject: string;
}): Record<string, string> {
  const env: Record<string, string> = { ...opts.env };
  if (env.KERNEL_ID !== undefined && env.KERNEL_ID !== opts.kernelId) {
    throw new KernelEnvError(
      `${opts.subject}: environment variable "KERNEL_ID" must be the create's own kernel id (leave it out: every create sends a fresh one)`,
      { variable: '"KERNEL_ID"' },
    );
  }
  env.KERNEL_ID = opts.kernelId;
  env.KERNEL_USERNAME ??= opts.username;
  if (opts.launchTimeoutMs !== undefined && Number.isFinite(opts.launchTimeoutMs)) {
    env.KERNEL_LAUNCH_TIMEOUT = String(Math.max(1, Math.floor(opts.launchTimeoutMs / 1000)));
  }
  checkCreateEnv(env, opts.subject);
  return env;
}

function clip(text: string): string {
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}
