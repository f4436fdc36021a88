import { accessSync, constants } from 'node:fs';
import { delimiter, dirname, isAbsolute, join } from 'node:path';
import { SANDBOX_BASE_ARGS } from './bubblewrap.js';
import { IsolationUnavailableError, type IsolationUnavailableReason } from './errors.js';
import { runProcess } from './subprocess.js';

/** What `detectSandbox()` found. */
export type SandboxStatus =
  | {
      available: true;
      backend: 'bubblewrap';
      /** Absolute path of the `bwrap` that worked. */
      bwrapPath: string;
      /** Absolute path of the GNU `env` used for signal control. */
      envPath: string;
      /** Absolute path of the `stat` the kernelspec launcher checks the policy's directories with. */
      statPath: string;
      /** `bwrap --version`, e.g. `bubblewrap 0.8.0`. */
      version: string | undefined;
    }
  | { available: false; reason: IsolationUnavailableReason; message: string };

/** Options of `detectSandbox()` and `assertSandbox()`. */
export interface DetectSandboxOptions {
  /** Directories searched for `bwrap` and `env`, PATH-style. @defaultValue process.env.PATH */
  searchPath?: string;
  /** Deadline for each check process. @defaultValue 10000 */
  timeoutMs?: number;
  /** Aborts the checks (their processes are killed); the call rejects with the signal's reason. */
  signal?: AbortSignal;
}

const working = new Map<string, SandboxStatus>();

/** Finds an executable named `name` on a PATH-style list; undefined when none. */
export function findExecutable(name: string, searchPath: string | undefined): string | undefined {
  for (const dir of (searchPath ?? '').split(delimiter)) {
    if (!dir || !isAbsolute(dir)) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

function describe(result: { code: number | null; signal: string | null; stderr: string }): string {
  const how = result.signal ? `was killed by ${result.signal}` : `exited with code ${result.code}`;
  const said = result.stderr.trim().split('\n').slice(-3).join(' / ');
  return said ? `${how}: ${said}` : how;
}

/** Why the sandbox cannot be used. */
type Unavailable = Extract<SandboxStatus, { available: false }>;

/** The executables the sandbox runs with. */
interface SandboxTools {
  bwrapPath: string;
  envPath: string;
  statPath: string;
}

/**
 * `bwrap` on the search path, GNU `env` (from /usr/bin or /bin first) and `stat` (next to that `env` first), or why
 * one is missing.
 */
function locateSandboxTools(searchPath: string | undefined): SandboxTools | Unavailable {
  const bwrapPath = findExecutable('bwrap', searchPath);
  if (!bwrapPath) {
    return {
      available: false,
      reason: 'no-bubblewrap',
      message: 'bubblewrap (bwrap) was not found on PATH: install it (apt-get install bubblewrap) to isolate kernels',
    };
  }
  const envPath = findExecutable('env', '/usr/bin:/bin') ?? findExecutable('env', searchPath);
  const statPath =
    (envPath ? findExecutable('stat', dirname(envPath)) : undefined) ??
    findExecutable('stat', '/usr/bin:/bin') ??
    findExecutable('stat', searchPath);
  if (!envPath) {
    return { available: false, reason: 'no-signal-control', message: 'No env executable was found' };
  }
  if (!statPath) {
    return {
      available: false,
      reason: 'no-coreutils',
      message: 'No stat executable was found (coreutils): isolated kernels check their directories with it at launch',
    };
  }
  return { bwrapPath, envPath, statPath };
}

/** Runs `env`'s signal control and a trivial sandbox; says why either failed, nothing when both ran. */
async function trySandbox(
  { bwrapPath, envPath }: SandboxTools,
  signal: AbortSignal | undefined,
  timeoutMs: number,
): Promise<Unavailable | undefined> {
  const signals = await runProcess(
    [envPath, '--ignore-signal=INT', '--default-signal=INT', '/bin/sh', '-c', 'exit 0'],
    {
      signal,
      timeoutMs,
    },
  );
  if (signals.code !== 0) {
    return {
      available: false,
      reason: 'no-signal-control',
      message: `${envPath} does not support --ignore-signal/--default-signal (GNU coreutils >= 8.31 needed): ${describe(signals)}`,
    };
  }
  const trial = await runProcess(
    [
      envPath,
      '--ignore-signal=INT',
      bwrapPath,
      ...SANDBOX_BASE_ARGS,
      '--tmpfs',
      '/tmp',
      '--',
      envPath,
      '--default-signal=INT',
      '/bin/sh',
      '-c',
      'exit 0',
    ],
    { signal, timeoutMs },
  );
  if (trial.code !== 0) {
    return {
      available: false,
      reason: 'namespaces-refused',
      message: `${bwrapPath} could not create its sandbox here (${describe(trial)}); user namespaces may be disabled`,
    };
  }
  return undefined;
}

/**
 * Checks whether read isolation can be enforced here: Linux, `bwrap` on the search path, GNU `env` with signal
 * control, `stat`, and a trivial sandbox that actually runs (its user, PID and mount namespaces are allowed, and it
 * can drop every capability). Never throws for an unavailable
 * sandbox; answers with `available: false`, a `reason` and a message. A working result is cached per executable.
 *
 * Use it to report the capability (`kernelwarden doctor`); use `assertSandbox()` before launching.
 */
export async function detectSandbox(opts: DetectSandboxOptions = {}): Promise<SandboxStatus> {
  if (process.platform !== 'linux') {
    return {
      available: false,
      reason: 'unsupported-platform',
      message: `Read isolation needs Linux with bubblewrap; this is ${process.platform}`,
    };
  }
  const tools = locateSandboxTools(opts.searchPath ?? process.env.PATH);
  if ('reason' in tools) return tools;
  const { bwrapPath, envPath, statPath } = tools;
  const key = `${bwrapPath}\0${envPath}\0${statPath}`;
  const cached = working.get(key);
  if (cached) return cached;
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const refused = await trySandbox(tools, opts.signal, timeoutMs);
  if (refused) return refused;
  const version = await runProcess([bwrapPath, '--version'], { signal: opts.signal, timeoutMs });
  const status: SandboxStatus = {
    available: true,
    backend: 'bubblewrap',
    bwrapPath,
    envPath,
    statPath,
    version: version.code === 0 ? version.stdout.trim() || undefined : undefined,
  };
  working.set(key, status);
  return status;
}

/**
 * Like `detectSandbox()`, but throws `IsolationUnavailableError` (with the `reason`) when the sandbox cannot be used.
 *
 * Use it on every launch path: a policy that cannot be enforced must refuse the kernel, never run it unisolated.
 */
export async function assertSandbox(
  opts: DetectSandboxOptions = {},
): Promise<Extract<SandboxStatus, { available: true }>> {
  const status = await detectSandbox(opts);
  if (!status.available) throw new IsolationUnavailableError(status.message, { reason: status.reason });
  return status;
}
