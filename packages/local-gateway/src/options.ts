import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { lazy, parseOptions } from '@kernelwarden/core';
import type * as Zod from 'zod/v3';
import type { LocalGatewayEvent } from './events.js';
import { DEFAULT_START_QUEUE_TIMEOUT_MS, defaultMaxConcurrentStarts, defaultMaxKernels } from './start-capacity.js';
import { zod } from './zod.js';

/** The environment variable naming the base state directory when `stateDir` is not given. */
export const STATE_DIR_ENV = 'KERNELWARDEN_STATE_DIR';
/** The environment variable naming the jupyter-server executable when `command` is not given. */
export const JUPYTER_SERVER_ENV = 'KERNELWARDEN_JUPYTER_SERVER';
/** The jupyter-server executable when neither `command` nor `KERNELWARDEN_JUPYTER_SERVER` names one (looked up on PATH). */
export const DEFAULT_SERVER_COMMAND = 'jupyter-server';
/** How long the server stays up after the last ticket went away: 30 s. */
export const DEFAULT_LINGER_MS = 30_000;
/** One deadline over the lock wait, the start and the readiness polling: 60 s. */
export const DEFAULT_STARTUP_TIMEOUT_MS = 60_000;
/** Deadline of each REST request acquire and status make: 10 s. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;
/** Grace between SIGTERM and SIGKILL when the server is stopped: 10 s. */
export const DEFAULT_STOP_TIMEOUT_MS = 10_000;
/** The most a kernel's journal holds on the server before its oldest messages go: 32 MiB. */
export const DEFAULT_JOURNAL_MAX_BYTES = 32 * 1024 * 1024;
/** How long a kernel's journal on the server keeps a message: 10 minutes. */
export const DEFAULT_JOURNAL_MAX_AGE_MS = 600_000;
/** The server's `root_dir`, so that any absolute directory can be a kernel's `path`. */
export const DEFAULT_ROOT_DIR = '/';
/**
 * The environment variable giving the warm pool when `pool` is not given: `0` (no pool), a count of python3
 * kernels (`2`), or counts per kernelspec (`python3=1,ir=1`).
 */
export const POOL_ENV = 'KERNELWARDEN_POOL';
/** The warm pool when neither `pool` nor `KERNELWARDEN_POOL` says otherwise: one started python3 kernel. */
export const DEFAULT_POOL: Readonly<Record<string, number>> = Object.freeze({ python3: 1 });
/** The environment variable choosing how Python kernels start when `launcher` is not given: `fork` or `exec`. */
export const LAUNCHER_ENV = 'KERNELWARDEN_LAUNCHER';
/** The environment variable naming modules the kernel launchers preload when `launcherPreload` is not given (`numpy,pandas`). */
export const LAUNCHER_PRELOAD_ENV = 'KERNELWARDEN_LAUNCHER_PRELOAD';
/** How Python kernels start when neither `launcher` nor `KERNELWARDEN_LAUNCHER` says: forked from a launcher. */
export const DEFAULT_LAUNCHER: LauncherMode = 'fork';
/** How the embedded server starts a Python kernel: forked from a launcher that has imported ipykernel, or exec'd. */
export type LauncherMode = 'fork' | 'exec';
/** What a preloaded module's name may be: a dotted Python name. */
const MODULE_NAME = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;
/** The kernelspec a bare count in `KERNELWARDEN_POOL` is for. */
const POOL_ENV_KERNELSPEC = 'python3';
/** What a pooled kernelspec's name may be: jupyter's own rule for kernelspec directory names. */
const KERNELSPEC_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
/** The most kernels the pool keeps started for one kernelspec. */
const MAX_POOL_SIZE = 16;

/** Options shared by `acquire`, `stop` and `status`: which gateway. */
export interface LocalGatewayLocation {
  /**
   * Base directory of the state. Each (user, jupyter-server interpreter) pair gets its own gateway directory
   * below it: `<stateDir>/gateway-<key>`.
   * @defaultValue env `KERNELWARDEN_STATE_DIR` (`STATE_DIR_ENV`), else `$XDG_STATE_HOME/kernelwarden`, else
   * `~/.local/state/kernelwarden`
   */
  stateDir?: string;
  /**
   * The jupyter-server executable, a name looked up on PATH or a path.
   * @defaultValue env `KERNELWARDEN_JUPYTER_SERVER` (`JUPYTER_SERVER_ENV`), else `DEFAULT_SERVER_COMMAND`
   */
  command?: string;
  /** Aborts the operation; it rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** Options of `LocalGateway.acquire()`. */
export interface LocalGatewayOptions extends LocalGatewayLocation {
  /**
   * How long the server stays up after its last ticket is released (or its last holder died); `0` stops it at
   * the last release. A longer linger promised by an earlier release is never cut short.
   * @defaultValue `DEFAULT_LINGER_MS`
   */
  lingerMs?: number;
  /**
   * One deadline for waiting on the lock, starting the server and its readiness; `0` disables it.
   * @defaultValue `DEFAULT_STARTUP_TIMEOUT_MS`
   */
  startupTimeoutMs?: number;
  /**
   * Deadline of each REST request acquire makes (health check, reaping orphan kernels); `0` disables it.
   * @defaultValue `DEFAULT_REQUEST_TIMEOUT_MS`
   */
  requestTimeoutMs?: number;
  /**
   * Extra directories put first on the server's `JUPYTER_PATH` (only used when this call starts the server).
   * @defaultValue `[]`
   */
  jupyterPath?: string[];
  /**
   * Variables the server — and so every kernel it starts, for any process — is given beyond the few it inherits
   * from the starting process (`SERVER_ENV_ALLOWED`: PATH, HOME, USER, locale, time zone…). Only used when this
   * call starts the server. Never put a secret here: a kernel's own variables belong in GatewayKernel's `env`.
   * @defaultValue `{}`
   */
  serverEnv?: Record<string, string>;
  /**
   * Extra jupyter-server arguments (only used when this call starts the server). Arguments that would set the
   * token, the address or the port are refused: the token must never reach a command line.
   * @defaultValue `[]`
   */
  serverArgs?: string[];
  /** The server's `root_dir` (kernels' default working directory). @defaultValue `DEFAULT_ROOT_DIR` */
  rootDir?: string;
  /**
   * Grace between SIGTERM and SIGKILL when this call (or its release) stops a server; `0` kills at once.
   * @defaultValue `DEFAULT_STOP_TIMEOUT_MS`
   */
  stopTimeoutMs?: number;
  /** Told what happens (lock waits, start, reuse, reaped kernels). Never receives the token. */
  onEvent?: (event: LocalGatewayEvent) => void;
  /**
   * The warm pool: how many started kernels the server keeps ready per kernelspec, for any process of this user to
   * claim (`GatewayKernel.start()` through the ticket claims one instead of creating a kernel, and applies its `cwd`,
   * `env` and prelude to it). `{}` or `0` counts turn it off. Each acquire sets the pool of the running server; the
   * linger watcher fills it in the background. Each idle pooled python3 kernel costs its memory (see the README).
   * @defaultValue env `KERNELWARDEN_POOL` (`POOL_ENV`), else `DEFAULT_POOL`
   */
  pool?: Record<string, number>;
  /**
   * The most kernels the server runs at once (pooled ones included). A create past it waits in the start queue for
   * one to go (at most `startQueueTimeoutMs`), then fails with `GatewayCapacityError` (`GATEWAY_CAPACITY`,
   * retryable). Only used when this call starts the server.
   * @defaultValue three quarters of the machine's memory at 160 MiB a kernel, at least 4 (`defaultMaxKernels()`)
   */
  maxKernels?: number;
  /**
   * How many kernels the server starts at once; further creates wait their turn, first come, first served (a start
   * holds its slot until the kernel answers). Only used when this call starts the server.
   * @defaultValue one per core (`defaultMaxConcurrentStarts()`)
   */
  maxConcurrentStarts?: number;
  /**
   * The longest a create waits in the server's start queue; a start asks for less when its own deadline is
   * shorter. Past it the create fails with `GatewayBusyError` (`GATEWAY_BUSY`) or, when the kernel limit held it,
   * `GatewayCapacityError`. Only used when this call starts the server.
   * @defaultValue `DEFAULT_START_QUEUE_TIMEOUT_MS` (120 s)
   */
  startQueueTimeoutMs?: number;
  /**
   * Each kernel's journal on the server: every iopub message from the kernel's start, numbered, kept until it is
   * `maxAgeMs` old or the kernel's journal holds more than `maxBytes` (oldest first); a client that lost its socket
   * reads what it missed from it (see the README's "Journal"). `enabled: false` runs the server without journals (its
   * kernels then behave as on a stock jupyter-server). Only used when this call starts the server.
   * @defaultValue `{ enabled: true, maxBytes: DEFAULT_JOURNAL_MAX_BYTES, maxAgeMs: DEFAULT_JOURNAL_MAX_AGE_MS }`
   * (32 MiB, 10 minutes)
   */
  journal?: { enabled?: boolean; maxBytes?: number; maxAgeMs?: number };
  /**
   * How the server starts a Python kernel whose command is its interpreter's ipykernel (the `python3` and
   * `kw-py-<hash>` kernelspecs): `fork` forks it from a launcher process of that interpreter that has already
   * imported ipykernel, IPython, zmq and tornado (and `launcherPreload`); `exec` starts a fresh interpreter.
   * Isolated kernelspecs and other languages are always exec'd. Only used when this call starts the server.
   * @defaultValue env `KERNELWARDEN_LAUNCHER` (`LAUNCHER_ENV`), else `DEFAULT_LAUNCHER` (`fork`)
   */
  launcher?: LauncherMode;
  /**
   * Modules every kernel launcher imports once, before it forks kernels (`['numpy', 'pandas']`): a forked
   * kernel finds them imported. A module that does not import is left out (the server's log says why); one that
   * leaves a thread or an event loop behind makes the launcher refuse to fork. Only used when this call starts the server.
   * @defaultValue env `KERNELWARDEN_LAUNCHER_PRELOAD` (`LAUNCHER_PRELOAD_ENV`, comma-separated), else `[]`
   */
  launcherPreload?: string[];
}

/** Options of `LocalGateway.stop()`. */
export interface LocalGatewayStopOptions extends LocalGatewayLocation {
  /** Grace between SIGTERM and SIGKILL; `0` kills at once. @defaultValue `DEFAULT_STOP_TIMEOUT_MS` */
  stopTimeoutMs?: number;
}

/** Where the gateway is, with every default applied. */
export interface ResolvedLocalGatewayLocation {
  /** The base state directory, absolute. */
  readonly stateDir: string;
  /** The jupyter-server executable as given (a name or a path; resolved on PATH when the gateway is located). */
  readonly command: string;
  /** The caller's signal, if any. */
  readonly signal: AbortSignal | undefined;
}

/** `LocalGateway.stop()`'s options with every default applied. */
export interface ResolvedLocalGatewayStopOptions extends ResolvedLocalGatewayLocation {
  /** Milliseconds between SIGTERM and SIGKILL. */
  readonly stopTimeoutMs: number;
}

/** `LocalGateway.acquire()`'s options with every default applied: what `resolveLocalGatewayOptions` returns. */
export interface ResolvedLocalGatewayOptions extends ResolvedLocalGatewayStopOptions {
  /** Milliseconds the server lingers after the last ticket. */
  readonly lingerMs: number;
  /** Milliseconds of the start-up deadline (`0`: none). */
  readonly startupTimeoutMs: number;
  /** Milliseconds of each REST request's deadline (`0`: none). */
  readonly requestTimeoutMs: number;
  /** Extra `JUPYTER_PATH` directories, first. */
  readonly jupyterPath: readonly string[];
  /** Extra variables of the server. */
  readonly serverEnv: Readonly<Record<string, string>>;
  /** Extra jupyter-server arguments. */
  readonly serverArgs: readonly string[];
  /** The server's `root_dir`. */
  readonly rootDir: string;
  /** The caller's event listener, if any. */
  readonly onEvent: ((event: LocalGatewayEvent) => void) | undefined;
  /** Started kernels kept ready per kernelspec (kernelspecs with 0 left out). */
  readonly pool: Readonly<Record<string, number>>;
  /** The most kernels the server runs at once. */
  readonly maxKernels: number;
  /** Kernels the server starts at once. */
  readonly maxConcurrentStarts: number;
  /** Milliseconds a create may wait in the start queue. */
  readonly startQueueTimeoutMs: number;
  /** Whether the server keeps kernel journals, and their bounds. */
  readonly journal: Readonly<{ enabled: boolean; maxBytes: number; maxAgeMs: number }>;
  /** How Python kernels start. */
  readonly launcher: LauncherMode;
  /** Modules the kernel launchers preload. */
  readonly launcherPreload: readonly string[];
}

/** The options' schemas, built on the first call (importing this module does not load zod). */
const schemas = lazy(() => {
  const { z } = zod();
  const signalSchema = z.custom<AbortSignal>((v) => v instanceof AbortSignal, 'must be an AbortSignal');
  const nonNegativeMs = z.number().finite().nonnegative();
  const locationShape = {
    stateDir: z.string().min(1).optional(),
    command: z.string().min(1).optional(),
    signal: signalSchema.optional(),
  };
  const FORBIDDEN_SERVER_ARG =
    /token|password|^--(ServerApp\.)?(ip|port|port-retries|port_retries|sock)\b|^--ip=|^--port=/i;

  const acquireSchema = z
    .object({
      ...locationShape,
      lingerMs: nonNegativeMs.optional(),
      startupTimeoutMs: nonNegativeMs.optional(),
      requestTimeoutMs: nonNegativeMs.optional(),
      jupyterPath: z.array(z.string().min(1)).optional(),
      serverEnv: z
        .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be a variable name'), z.string())
        .optional(),
      serverArgs: z
        .array(
          z
            .string()
            .refine((arg) => !FORBIDDEN_SERVER_ARG.test(arg), 'must not set the token, password, address or port'),
        )
        .optional(),
      rootDir: z.string().min(1).optional(),
      stopTimeoutMs: nonNegativeMs.optional(),
      onEvent: z
        .custom<(event: LocalGatewayEvent) => void>((v) => typeof v === 'function', 'must be a function')
        .optional(),
      pool: poolSchema(z).optional(),
      maxKernels: z.number().int().min(1).optional(),
      maxConcurrentStarts: z.number().int().min(1).optional(),
      startQueueTimeoutMs: nonNegativeMs.optional(),
      journal: z
        .object({
          enabled: z.boolean().optional(),
          maxBytes: z.number().int().nonnegative().optional(),
          maxAgeMs: nonNegativeMs.optional(),
        })
        .strict()
        .optional(),
      launcher: launcherSchema(z).optional(),
      launcherPreload: preloadSchema(z).optional(),
    })
    .strict();
  const stopSchema = z.object({ ...locationShape, stopTimeoutMs: nonNegativeMs.optional() }).strict();
  const locationSchema = z.object(locationShape).strict();
  return { acquireSchema, stopSchema, locationSchema };
});

function poolSchema(z: typeof Zod.z) {
  return z.record(
    z.string().regex(KERNELSPEC_NAME, 'must be a kernelspec name'),
    z.number().int().min(0).max(MAX_POOL_SIZE),
  );
}

function launcherSchema(z: typeof Zod.z) {
  return z.enum(['fork', 'exec']);
}

function preloadSchema(z: typeof Zod.z) {
  return z.array(z.string().regex(MODULE_NAME, 'must be a Python module name')).max(64);
}

type Env = Readonly<Record<string, string | undefined>>;

/** `KERNELWARDEN_POOL`'s value as a pool; `InvalidOptionsError` (path `KERNELWARDEN_POOL`) when malformed. */
function poolFromEnv(text: string): Record<string, number> {
  const trimmed = text.trim();
  const pool: Record<string, number> = {};
  if (/^\d+$/.test(trimmed)) pool[POOL_ENV_KERNELSPEC] = Number(trimmed);
  else {
    for (const part of trimmed.split(',')) {
      const [name, count] = part.split('=').map((s) => s.trim());
      pool[name ?? ''] = count !== undefined && /^\d+$/.test(count) ? Number(count) : Number.NaN;
    }
  }
  return parseOptions(poolSchema(zod().z), pool, {
    subject: `${POOL_ENV} (e.g. 0, 2 or python3=1,ir=1)`,
    root: POOL_ENV,
  });
}

/** `KERNELWARDEN_LAUNCHER`'s value; `InvalidOptionsError` (path `KERNELWARDEN_LAUNCHER`) when it is neither. */
function launcherFromEnv(text: string): LauncherMode {
  return parseOptions(launcherSchema(zod().z), text.trim(), {
    subject: `${LAUNCHER_ENV} (fork or exec)`,
    root: LAUNCHER_ENV,
  });
}

/** `KERNELWARDEN_LAUNCHER_PRELOAD`'s modules; `InvalidOptionsError` (path `KERNELWARDEN_LAUNCHER_PRELOAD`) when malformed. */
function preloadFromEnv(text: string): string[] {
  const names = text
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  return parseOptions(preloadSchema(zod().z), names, {
    subject: `${LAUNCHER_PRELOAD_ENV} (module names, comma-separated)`,
    root: LAUNCHER_PRELOAD_ENV,
  });
}

/** The pool with every kernelspec of count 0 left out. */
function activePool(pool: Record<string, number>): Readonly<Record<string, number>> {
  return Object.freeze(Object.fromEntries(Object.entries(pool).filter(([, n]) => n > 0)));
}

function baseStateDir(explicit: string | undefined, env: Env): string {
  if (explicit) return resolve(explicit);
  if (env[STATE_DIR_ENV]) return resolve(env[STATE_DIR_ENV]);
  if (env.XDG_STATE_HOME) return join(resolve(env.XDG_STATE_HOME), 'kernelwarden');
  return join(homedir(), '.local', 'state', 'kernelwarden');
}

function location(
  opts: { stateDir?: string | undefined; command?: string | undefined; signal?: AbortSignal | undefined },
  env: Env,
): ResolvedLocalGatewayLocation {
  return {
    stateDir: baseStateDir(opts.stateDir, env),
    command: opts.command ?? (env[JUPYTER_SERVER_ENV] || DEFAULT_SERVER_COMMAND),
    signal: opts.signal,
  };
}

/**
 * Validates `LocalGateway.acquire()`'s options and applies every default (the environment's `KERNELWARDEN_STATE_DIR`
 * and `KERNELWARDEN_JUPYTER_SERVER` included); throws `InvalidOptionsError` naming the bad field (`serverArgs.1`).
 *
 * `acquire()` calls it; call it yourself to check options from configuration, or to see where the state would be.
 */
export function resolveLocalGatewayOptions(
  options: LocalGatewayOptions = {},
  env: Env = process.env,
): ResolvedLocalGatewayOptions {
  const opts = parseOptions(schemas().acquireSchema, options, 'LocalGateway.acquire options');
  return Object.freeze({
    ...location(opts, env),
    lingerMs: opts.lingerMs ?? DEFAULT_LINGER_MS,
    startupTimeoutMs: opts.startupTimeoutMs ?? DEFAULT_STARTUP_TIMEOUT_MS,
    requestTimeoutMs: opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
    jupyterPath: opts.jupyterPath ?? [],
    serverEnv: opts.serverEnv ?? {},
    serverArgs: opts.serverArgs ?? [],
    rootDir: opts.rootDir ?? DEFAULT_ROOT_DIR,
    stopTimeoutMs: opts.stopTimeoutMs ?? DEFAULT_STOP_TIMEOUT_MS,
    onEvent: opts.onEvent,
    pool: activePool(opts.pool ?? (env[POOL_ENV] ? poolFromEnv(env[POOL_ENV]) : { ...DEFAULT_POOL })),
    maxKernels: opts.maxKernels ?? defaultMaxKernels(),
    maxConcurrentStarts: opts.maxConcurrentStarts ?? defaultMaxConcurrentStarts(),
    startQueueTimeoutMs: opts.startQueueTimeoutMs ?? DEFAULT_START_QUEUE_TIMEOUT_MS,
    journal: Object.freeze({
      enabled: opts.journal?.enabled ?? true,
      maxBytes: opts.journal?.maxBytes ?? DEFAULT_JOURNAL_MAX_BYTES,
      maxAgeMs: opts.journal?.maxAgeMs ?? DEFAULT_JOURNAL_MAX_AGE_MS,
    }),
    launcher: opts.launcher ?? (env[LAUNCHER_ENV] ? launcherFromEnv(env[LAUNCHER_ENV]) : DEFAULT_LAUNCHER),
    launcherPreload: Object.freeze(
      opts.launcherPreload ?? (env[LAUNCHER_PRELOAD_ENV] ? preloadFromEnv(env[LAUNCHER_PRELOAD_ENV]) : []),
    ),
  });
}

/** `LocalGateway.stop()`'s options, validated and defaulted like `resolveLocalGatewayOptions`. */
export function resolveStopOptions(
  options: LocalGatewayStopOptions = {},
  env: Env = process.env,
): ResolvedLocalGatewayStopOptions {
  const opts = parseOptions(schemas().stopSchema, options, 'LocalGateway.stop options');
  return Object.freeze({ ...location(opts, env), stopTimeoutMs: opts.stopTimeoutMs ?? DEFAULT_STOP_TIMEOUT_MS });
}

/** `LocalGateway.status()`'s options, validated and defaulted like `resolveLocalGatewayOptions`. */
export function resolveLocation(
  options: LocalGatewayLocation = {},
  env: Env = process.env,
): ResolvedLocalGatewayLocation {
  return Object.freeze(location(parseOptions(schemas().locationSchema, options, 'LocalGateway.status options'), env));
}
