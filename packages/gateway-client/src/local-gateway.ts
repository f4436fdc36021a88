import { randomBytes } from 'node:crypto';
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { abortScope, DeadlineExceededError, KernelwardenError, withDeadline } from '@kernelwarden/core';
import { z } from 'zod';
import { GatewayUnavailableError } from './errors.js';
import type { KernelDiagnostics, KernelOwnership, WebSocketClass } from './gateway-client.js';
import { guardedTransport } from './local-gateway/guarded-transport.js';
import { readServerInfo, type ServerInfo, writeServerInfo } from './local-gateway/info-file.js';
import { kernelDiagnostics } from './local-gateway/kernel-diagnostics.js';
import { kernelLaunchConfig, MAX_IPC_BASE_LENGTH } from './local-gateway/kernel-launch.js';
import { type GatewayLayout, gatewayLayout } from './local-gateway/layout.js';
import { addLease, clearExpiredIdle, lingerPending, liveLeases, markIdle } from './local-gateway/leases.js';
import { spawnLingerWatcher } from './local-gateway/linger-watcher.js';
import { acquireLock, type HeldLock } from './local-gateway/lock.js';
import { clearOwners, forgetOwner, listOwners, reapOrphanKernels, recordOwner } from './local-gateway/ownership.js';
import { isProcessAlive, type ProcessIdentity } from './local-gateway/process-identity.js';
import { resolveServerCommand, type ServerCommand } from './local-gateway/server-command.js';
import { LOCAL_GATEWAY_SERVER_CONFIG } from './local-gateway/server-config.js';
import { serverEnvironment } from './local-gateway/server-env.js';
import {
  answersStatus,
  fileSize,
  freeLoopbackPort,
  logTail,
  rotateLog,
  type SpawnedProcess,
  spawnDetached,
  stopServerProcess,
  unauthenticatedStatus,
  waitUntilReady,
} from './local-gateway/server-process.js';
import { mayStopRecordedServer, unverifiedServerReason } from './local-gateway/server-verification.js';
import {
  ensurePrivateDir,
  readTextFile,
  removeFile,
  unsafeDirectoryReason,
  writePrivateFileAtomic,
} from './local-gateway/state-dir.js';
import { parseOptions } from './validation.js';

const DEFAULT_LINGER_MS = 30_000;
const DEFAULT_STARTUP_TIMEOUT_MS = 60_000;
const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;
const DEFAULT_STOP_GRACE_MS = 10_000;
const PORT_ATTEMPTS = 3;

/** Something `LocalGateway` did, for logs and progress displays. Events never carry the token. */
export type LocalGatewayEvent =
  | { type: 'lock-wait'; ownerPid: number }
  | { type: 'lock-takeover'; previousOwnerPid: number | undefined }
  | { type: 'server-reused'; baseUrl: string; pid: number }
  | { type: 'server-starting'; port: number; logFile: string }
  | { type: 'server-ready'; baseUrl: string; pid: number }
  | { type: 'server-stopped'; pid: number; reason: 'unhealthy' | 'last-release' }
  | { type: 'server-untrusted'; reason: string }
  | { type: 'port-taken'; port: number }
  | { type: 'kernel-reaped'; kernelId: string; ownerPid: number }
  | { type: 'reap-failed'; kernelId: string; message: string };

/** Options shared by `acquire`, `stop` and `status`: which gateway. */
export interface LocalGatewayLocation {
  /**
   * Base directory of the state. Each (user, jupyter-server interpreter) pair gets its own gateway directory
   * below it: `<stateDir>/gateway-<key>`.
   * @defaultValue env `KERNELWARDEN_STATE_DIR`, else `$XDG_STATE_HOME/kernelwarden`, else `~/.local/state/kernelwarden`
   */
  stateDir?: string;
  /**
   * The jupyter-server executable, a name looked up on PATH or a path.
   * @defaultValue env `KERNELWARDEN_JUPYTER_SERVER`, else 'jupyter-server'
   */
  command?: string;
  /** Aborts the operation; it rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** Options of `LocalGateway.acquire()`. */
export interface LocalGatewayOptions extends LocalGatewayLocation {
  /**
   * How long the server stays up after its last lease is released (or its last holder died); `0` stops it at
   * the last release. A longer linger promised by an earlier release is never cut short.
   * @defaultValue 30000
   */
  lingerMs?: number;
  /** One deadline for waiting on the lock, starting the server and its readiness; `0` disables it. @defaultValue 60000 */
  startupTimeoutMs?: number;
  /** Deadline of each REST request acquire makes (health check, reaping orphan kernels); `0` disables it. @defaultValue 10000 */
  requestTimeoutMs?: number;
  /** Extra directories put first on the server's `JUPYTER_PATH` (only used when this call starts the server). */
  jupyterPath?: string[];
  /**
   * Variables the server — and so every kernel it starts, for any process — is given beyond the few it inherits
   * from the starting process (`SERVER_ENV_ALLOWED`: PATH, HOME, USER, locale, time zone…). Only used when this
   * call starts the server. Never put a secret here: a kernel's own variables belong in GatewayKernel's `env`.
   * @defaultValue {}
   */
  serverEnv?: Record<string, string>;
  /**
   * Extra jupyter-server arguments (only used when this call starts the server). Arguments that would set the
   * token, the address or the port are refused: the token must never reach a command line.
   */
  serverArgs?: string[];
  /** The server's `root_dir` (kernels' default working directory). @defaultValue '/' */
  rootDir?: string;
  /** Grace between SIGTERM and SIGKILL when this call (or its release) stops a server; `0` kills at once. @defaultValue 10000 */
  stopTimeoutMs?: number;
  /** Told what happens (lock waits, start, reuse, reaped kernels). Never receives the token. */
  onEvent?: (event: LocalGatewayEvent) => void;
}

/** Options of `LocalGateway.stop()`. */
export interface LocalGatewayStopOptions extends LocalGatewayLocation {
  /** Grace between SIGTERM and SIGKILL; `0` kills at once. @defaultValue 10000 */
  stopTimeoutMs?: number;
}

/**
 * A lease on the embedded gateway: pass it as `gateway` to `GatewayKernel.start()` / `new GatewayClient()`, and
 * release it (or `await using` it) when done. The server is shared by every process of the same user and
 * interpreter, and stops once no lease is held for `lingerMs`.
 */
export interface LocalGatewayLease extends AsyncDisposable {
  /** `http://127.0.0.1:<port>`. */
  readonly baseUrl: string;
  /** The server's token (send as `Authorization: token …`). Never print it. */
  readonly token: string;
  /** A directory on the server's `JUPYTER_PATH`: a kernelspec folder written here is launchable by name at once. */
  readonly kernelSpecDir: string;
  /** This gateway's state directory (`<stateDir>/gateway-<key>`). */
  readonly stateDir: string;
  /** The server's pid. */
  readonly pid: number;
  /** True when an already running server was reused. */
  readonly reused: boolean;
  /** Records which process created which kernel; GatewayClient/GatewayKernel call it when given this lease. */
  readonly ownership: KernelOwnership;
  /**
   * Whether a kernel's process runs, and its last stderr lines (from the server's log): `GatewayKernel.start()`
   * uses them to fail a kernel that dies while starting at once, with its own error.
   */
  readonly diagnostics: KernelDiagnostics;
  /**
   * The fetch GatewayClient/GatewayKernel use through this lease: before each request it checks that the server
   * this lease is for still holds its port (from `/proc`), so nothing — least of all the token — is ever sent to a
   * process that took the port after the server went away.
   */
  readonly fetch: typeof fetch;
  /** The WebSocket class for kernel channels through this lease, with the same check before each connect. */
  readonly WebSocket: WebSocketClass;
  /** Gives the lease back; idempotent. The last release starts the linger (or stops the server when it is 0). */
  release(opts?: { signal?: AbortSignal }): Promise<void>;
}

/** What `LocalGateway.status()` reports, for the CLI. */
export interface LocalGatewayStatus {
  /** True when a server is recorded, alive and answering. */
  running: boolean;
  stateDir: string;
  command: string;
  interpreter: string;
  baseUrl?: string;
  pid?: number;
  startedAt?: string;
  /** Processes holding a lease. */
  holders: { pid: number; acquiredAt: string }[];
  /** Kernels the server lists, with the process that created each when known. */
  kernels: { id: string; name: string; executionState?: string; ownerPid?: number; ownerAlive?: boolean }[];
}

/** Codes of `LocalGatewayError`. */
export type LocalGatewayErrorCode =
  | 'LOCAL_GATEWAY_COMMAND'
  | 'LOCAL_GATEWAY_STATE_DIR'
  | 'LOCAL_GATEWAY_INSECURE'
  | 'LOCAL_GATEWAY_TOKEN_REFUSED'
  | 'LOCAL_GATEWAY_CONFIG';

/**
 * The embedded gateway cannot be provided: jupyter-server is not installed (`LOCAL_GATEWAY_COMMAND`), the state
 * directory cannot be created or belongs to someone else (`LOCAL_GATEWAY_STATE_DIR`), or a system-wide jupyter
 * config fights the token: the server answers without it (`LOCAL_GATEWAY_INSECURE`) or refuses it
 * (`LOCAL_GATEWAY_TOKEN_REFUSED`), or the server did not run its own configuration to the end
 * (`LOCAL_GATEWAY_CONFIG`: its kernels would run without ipc, logs and markers); the server is then stopped before
 * this is thrown. Not retryable.
 */
export class LocalGatewayError extends KernelwardenError {
  static override readonly brand: string = 'LocalGatewayError';

  constructor(message: string, options: { code: LocalGatewayErrorCode; cause?: unknown }) {
    super(message, { code: options.code, cause: options.cause });
  }
}

const signalSchema = z.custom<AbortSignal>((v) => v instanceof AbortSignal, 'must be an AbortSignal');
const nonNegativeMs = z.number().nonnegative();
const locationShape = {
  stateDir: z.string().min(1).optional(),
  command: z.string().min(1).optional(),
  signal: signalSchema.optional(),
};
const FORBIDDEN_SERVER_ARG =
  /token|password|^--(ServerApp\.)?(ip|port|port-retries|port_retries|sock)\b|^--ip=|^--port=/i;

const acquireSchema = z.strictObject({
  ...locationShape,
  lingerMs: nonNegativeMs.optional(),
  startupTimeoutMs: nonNegativeMs.optional(),
  requestTimeoutMs: nonNegativeMs.optional(),
  jupyterPath: z.array(z.string().min(1)).optional(),
  serverEnv: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be a variable name'), z.string()).optional(),
  serverArgs: z
    .array(
      z.string().refine((arg) => !FORBIDDEN_SERVER_ARG.test(arg), 'must not set the token, password, address or port'),
    )
    .optional(),
  rootDir: z.string().min(1).optional(),
  stopTimeoutMs: nonNegativeMs.optional(),
  onEvent: z
    .custom<(event: LocalGatewayEvent) => void>((v) => typeof v === 'function', 'must be a function')
    .optional(),
});
const stopSchema = z.strictObject({ ...locationShape, stopTimeoutMs: nonNegativeMs.optional() });
const locationSchema = z.strictObject(locationShape);

interface Located {
  server: ServerCommand;
  layout: GatewayLayout;
}

function baseStateDir(explicit: string | undefined): string {
  if (explicit) return resolve(explicit);
  if (process.env.KERNELWARDEN_STATE_DIR) return resolve(process.env.KERNELWARDEN_STATE_DIR);
  if (process.env.XDG_STATE_HOME) return join(resolve(process.env.XDG_STATE_HOME), 'kernelwarden');
  return join(homedir(), '.local', 'state', 'kernelwarden');
}

function locate(opts: { stateDir?: string | undefined; command?: string | undefined }): Located {
  const name = opts.command ?? (process.env.KERNELWARDEN_JUPYTER_SERVER || 'jupyter-server');
  const server = resolveServerCommand(name);
  if (!server) {
    throw new LocalGatewayError(
      `Cannot start the local gateway: "${name}" was not found on PATH; install jupyter_server (pip install jupyter-server) or pass \`command\``,
      { code: 'LOCAL_GATEWAY_COMMAND' },
    );
  }
  return { server, layout: gatewayLayout(join(baseStateDir(opts.stateDir), `gateway-${server.key}`)) };
}

function prepareDirs(layout: GatewayLayout): void {
  try {
    mkdirSync(layout.dir, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new LocalGatewayError(`Cannot create the local gateway's state directory ${layout.dir}`, {
      code: 'LOCAL_GATEWAY_STATE_DIR',
      cause: error,
    });
  }
  // The directory name is predictable: refuse one planted by someone else (or a symlink to elsewhere).
  const st = lstatSync(layout.dir);
  const uid = typeof process.getuid === 'function' ? process.getuid() : st.uid;
  if (!st.isDirectory() || st.uid !== uid) {
    throw new LocalGatewayError(
      `The local gateway's state directory ${layout.dir} is not a directory owned by this user; remove it or choose another stateDir`,
      { code: 'LOCAL_GATEWAY_STATE_DIR' },
    );
  }
  for (const dir of [
    layout.dir,
    layout.leases,
    layout.owners,
    layout.runtime,
    layout.kernelSpecDir,
    layout.config,
    layout.kernelLogs,
  ]) {
    ensurePrivateDir(dir);
  }
  const unsafe = unsafeDirectoryReason(layout.dir);
  if (unsafe) {
    throw new LocalGatewayError(
      `The local gateway's state directory ${layout.dir} is not private to this user (${unsafe}); fix its ownership and permissions or choose another stateDir`,
      { code: 'LOCAL_GATEWAY_STATE_DIR' },
    );
  }
}

/**
 * A private directory for the kernels' ipc sockets whose path is short enough for socket names: the state
 * directory's own `ipc` when it is, else a fresh one under the system temporary directory (random name, 0700).
 */
function makeIpcDir(layout: GatewayLayout): string {
  if (layout.ipc.length <= MAX_IPC_BASE_LENGTH) {
    rmSync(layout.ipc, { recursive: true, force: true });
    ensurePrivateDir(layout.ipc);
    return layout.ipc;
  }
  const dir = mkdtempSync(join(tmpdir(), 'kw-ipc-'));
  chmodSync(dir, 0o700);
  if (dir.length > MAX_IPC_BASE_LENGTH) {
    rmSync(dir, { recursive: true, force: true });
    throw new LocalGatewayError(
      `Neither the state directory ${layout.dir} nor the temporary directory ${tmpdir()} gives a path short enough for the kernels' sockets (at most ${MAX_IPC_BASE_LENGTH} characters); set TMPDIR or stateDir to a shorter path`,
      { code: 'LOCAL_GATEWAY_STATE_DIR' },
    );
  }
  return dir;
}

/** Removes a server run's ipc directory (the state directory's own is emptied). */
function removeIpcDir(layout: GatewayLayout, ipcDir: string | undefined): void {
  if (!ipcDir) return;
  if (ipcDir !== layout.ipc && !/\/kw-ipc-[^/]+$/.test(ipcDir)) return;
  rmSync(ipcDir, { recursive: true, force: true });
}

/** A kernel log not written for this long is removed (a running kernel keeps writing to its open file). */
const KERNEL_LOG_KEEP_MS = 3_600_000;

function pruneKernelLogs(layout: GatewayLayout): void {
  let names: string[];
  try {
    names = readdirSync(layout.kernelLogs);
  } catch {
    return;
  }
  const now = Date.now();
  for (const name of names) {
    const path = join(layout.kernelLogs, name);
    try {
      if (now - lstatSync(path).mtimeMs > KERNEL_LOG_KEEP_MS) rmSync(path, { force: true });
    } catch {
      // gone meanwhile
    }
  }
}

/** jupyter-server writes its token into runtime files (`jpserver-<pid>.json`, `…-open.html`): keep them 0600. */
function tightenRuntimeFiles(layout: GatewayLayout): void {
  let names: string[];
  try {
    names = readdirSync(layout.runtime);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith('jpserver-')) continue;
    try {
      chmodSync(join(layout.runtime, name), 0o600);
    } catch {
      // removed meanwhile
    }
  }
}

function emitter(onEvent: ((event: LocalGatewayEvent) => void) | undefined): (event: LocalGatewayEvent) => void {
  return (event) => {
    try {
      onEvent?.(event);
    } catch {
      // a listener's failure must not break the gateway
    }
  };
}

/** Removes the state of a stopped server (leases and ownership records refer to it alone). */
function clearServerState(layout: GatewayLayout, info?: ServerInfo): void {
  removeIpcDir(layout, info?.ipcDir);
  removeFile(layout.info);
  removeFile(layout.idle);
  removeFile(layout.tokenFile);
  clearOwners(layout.owners);
  liveLeases(layout.leases); // prunes dead holders' files
}

/**
 * Stops the recorded server and its watcher; the caller holds the lock. A recorded pid that is not this gateway's
 * server (a forged or stale `server.json`) is never signalled: only the kernels found by their connection files and
 * markers are.
 */
async function shutDownServer(layout: GatewayLayout, info: ServerInfo, graceMs: number): Promise<void> {
  if (info.watcher && isProcessAlive(info.watcher) && isWatcherOf(layout, info.watcher.pid)) {
    try {
      process.kill(info.watcher.pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  const server = mayStopRecordedServer(layout, info) ? info.server : { pid: -1 };
  await stopServerProcess(server, { runtimeDir: layout.runtime, graceMs, instance: info.instance });
  clearServerState(layout, info);
}

function isWatcherOf(layout: GatewayLayout, pid: number): boolean {
  return (readTextFile(`/proc/${pid}/cmdline`) ?? (process.platform === 'linux' ? '' : layout.watcherScript)).includes(
    layout.watcherScript,
  );
}

/**
 * The server's environment, which every kernel it launches inherits whoever asks for it: a few harmless variables
 * of the starting process (`SERVER_ENV_ALLOWED`), the caller's explicit `serverEnv`, and jupyter's paths. Nothing
 * else of the starter's — no credentials, no gateway token — reaches a kernel.
 */
function serverEnv(
  layout: GatewayLayout,
  jupyterPath: readonly string[],
  extra: Readonly<Record<string, string>>,
): Record<string, string> {
  const userPath = process.env.JUPYTER_PATH ? process.env.JUPYTER_PATH.split(delimiter).filter(Boolean) : [];
  return serverEnvironment(process.env, {
    ...extra,
    // The token reaches the server through a file (0600) it reads once at start-up and that is removed once it is
    // ready, so it is neither on the command line (`ps`) nor in the environment its kernels inherit.
    JUPYTER_TOKEN_FILE: layout.tokenFile,
    JUPYTER_RUNTIME_DIR: layout.runtime,
    JUPYTER_CONFIG_DIR: layout.config,
    JUPYTER_PATH: [...jupyterPath.map((p) => resolve(p)), layout.data, ...userPath].join(delimiter),
  });
}

function serverArgs(
  layout: GatewayLayout,
  port: number,
  opts: { rootDir: string; extra: readonly string[] },
): string[] {
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  return [
    ...(isRoot ? ['--allow-root'] : []),
    '--no-browser',
    '--ip=127.0.0.1',
    `--port=${port}`,
    '--port-retries=0',
    `--ServerApp.root_dir=${opts.rootDir}`,
    // The runtime dir comes from JUPYTER_RUNTIME_DIR; the cookie secret's place in it (its default there) is named
    // on the command line so that tools and test teardowns can tell which gateway a server belongs to. Settings whose
    // names depend on the server's version (the iopub rate limits) are in the config file of its own config dir
    // (LOCAL_GATEWAY_SERVER_CONFIG), with the iopub high-water mark.
    `--ServerApp.cookie_secret_file=${join(layout.runtime, 'jupyter_cookie_secret')}`,
    '--ServerApp.terminals_enabled=False',
    // A kernel that ignores the shutdown request (a SIGINT-ignoring cell) is signalled after 1 s instead of 5 s:
    // every kill and restart of a stuck kernel is that much faster. Idle kernels exit well within it.
    ...(opts.extra.some((arg) => arg.startsWith('--KernelManager.shutdown_wait_time'))
      ? []
      : ['--KernelManager.shutdown_wait_time=1']),
    ...opts.extra,
  ];
}

type AcquireOptions = z.output<typeof acquireSchema>;

async function startServer(
  located: Located,
  opts: AcquireOptions,
  signal: AbortSignal,
  emit: (event: LocalGatewayEvent) => void,
): Promise<ServerInfo> {
  const { layout, server } = located;
  const lingerMs = opts.lingerMs ?? DEFAULT_LINGER_MS;
  const graceMs = opts.stopTimeoutMs ?? DEFAULT_STOP_GRACE_MS;
  for (let attempt = 1; ; attempt++) {
    const port = await freeLoopbackPort();
    const baseUrl = `http://127.0.0.1:${port}`;
    const token = randomBytes(32).toString('hex');
    const instance = randomBytes(8).toString('hex');
    const ipcDir = makeIpcDir(layout);
    const configMarker = join(layout.runtime, 'kernelwarden-config-loaded');
    removeFile(configMarker);
    writePrivateFileAtomic(layout.tokenFile, token);
    writePrivateFileAtomic(
      layout.serverConfig,
      LOCAL_GATEWAY_SERVER_CONFIG +
        kernelLaunchConfig({ instance, ipcDir, kernelLogDir: layout.kernelLogs, loadedMarker: configMarker }),
    );
    rotateLog(layout.log);
    const logStart = fileSize(layout.log);
    emit({ type: 'server-starting', port, logFile: layout.log });
    const child: SpawnedProcess = spawnDetached(
      server.command,
      serverArgs(layout, port, { rootDir: opts.rootDir ?? '/', extra: opts.serverArgs ?? [] }),
      { env: serverEnv(layout, opts.jupyterPath ?? [], opts.serverEnv ?? {}), logFile: layout.log, cwd: layout.dir },
    );
    try {
      const readiness = await waitUntilReady({ baseUrl, port, token, server: child, signal });
      removeFile(layout.tokenFile);
      if ('foreign' in readiness) {
        emit({ type: 'port-taken', port });
        if (attempt < PORT_ATTEMPTS) {
          await stopServerProcess(child.identity, { runtimeDir: layout.runtime, graceMs: 2_000, instance });
          removeIpcDir(layout, ipcDir);
          continue;
        }
        throw new GatewayUnavailableError(
          `The local gateway could not start: another process took its port ${port} (${PORT_ATTEMPTS} times); nothing was sent to it`,
          { url: baseUrl },
        );
      }
      if ('refused' in readiness) {
        throw new LocalGatewayError(
          `The local gateway's jupyter-server at ${baseUrl} refused its own token (HTTP ${readiness.refused}): a system-wide jupyter_server_config overrides ServerApp.token; see ${layout.log}`,
          { code: 'LOCAL_GATEWAY_TOKEN_REFUSED' },
        );
      }
      if (!readiness.ready) {
        const tail = logTail(layout.log, token, logStart);
        if (attempt < PORT_ATTEMPTS && /already in use|Address already/i.test(tail)) {
          removeIpcDir(layout, ipcDir);
          continue;
        }
        throw new GatewayUnavailableError(
          `The local gateway's jupyter-server exited during start-up (${readiness.ended}); see ${layout.log}:\n${tail}`,
          { url: baseUrl },
        );
      }
      if (readTextFile(configMarker) !== instance) {
        throw new LocalGatewayError(
          `The local gateway's jupyter-server did not run its own configuration to the end, so its kernels would run without their safeguards; refusing to use it. See ${layout.log}:\n${logTail(layout.log, token, logStart)}`,
          { code: 'LOCAL_GATEWAY_CONFIG' },
        );
      }
      const unauthenticated = await unauthenticatedStatus(baseUrl, signal);
      if (unauthenticated !== 401 && unauthenticated !== 403) {
        throw new LocalGatewayError(
          `The local gateway's jupyter-server at ${baseUrl} answered a request without the token (HTTP ${unauthenticated}); refusing to use it. Check the system-wide jupyter_server_config for a token or auth override.`,
          { code: 'LOCAL_GATEWAY_INSECURE' },
        );
      }
      const info: ServerInfo = {
        version: 1,
        baseUrl,
        port,
        token,
        server: child.identity,
        command: server.command,
        interpreter: server.interpreter,
        startedAt: new Date().toISOString(),
        lingerMs,
        instance,
        ipcDir,
      };
      tightenRuntimeFiles(layout);
      writeServerInfo(layout.info, info);
      const watcher = spawnLingerWatcher({
        layout,
        server: child.identity,
        defaultLingerMs: lingerMs,
        pollMs: Math.min(1_000, Math.max(100, Math.floor(lingerMs / 10))),
        graceMs,
      });
      info.watcher = watcher.identity;
      writeServerInfo(layout.info, info);
      emit({ type: 'server-ready', baseUrl, pid: child.identity.pid });
      return info;
    } catch (error) {
      removeFile(layout.tokenFile);
      await stopServerProcess(child.identity, { runtimeDir: layout.runtime, graceMs: 2_000, instance });
      removeIpcDir(layout, ipcDir);
      throw error;
    }
  }
}

async function ensureServer(
  located: Located,
  opts: AcquireOptions,
  signal: AbortSignal,
  emit: (event: LocalGatewayEvent) => void,
): Promise<{ info: ServerInfo; reused: boolean }> {
  const { layout } = located;
  const requestTimeoutMs = opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const recorded = readServerInfo(layout.info);
  const untrusted = recorded ? unverifiedServerReason(layout, recorded) : undefined;
  if (recorded && untrusted && isProcessAlive(recorded.server)) emit({ type: 'server-untrusted', reason: untrusted });
  if (recorded && !untrusted) {
    if (await answersStatus(recorded.baseUrl, recorded.token, signal, requestTimeoutMs)) {
      if (!recorded.watcher || !isProcessAlive(recorded.watcher)) {
        const lingerMs = opts.lingerMs ?? recorded.lingerMs;
        recorded.watcher = spawnLingerWatcher({
          layout,
          server: recorded.server,
          defaultLingerMs: lingerMs,
          pollMs: Math.min(1_000, Math.max(100, Math.floor(lingerMs / 10))),
          graceMs: opts.stopTimeoutMs ?? DEFAULT_STOP_GRACE_MS,
        }).identity;
        writeServerInfo(layout.info, recorded);
      }
      emit({ type: 'server-reused', baseUrl: recorded.baseUrl, pid: recorded.server.pid });
      return { info: recorded, reused: true };
    }
    emit({ type: 'server-stopped', pid: recorded.server.pid, reason: 'unhealthy' });
  }
  if (recorded) await shutDownServer(layout, recorded, opts.stopTimeoutMs ?? DEFAULT_STOP_GRACE_MS);
  else {
    await stopServerProcess({ pid: -1 }, { runtimeDir: layout.runtime, graceMs: 0 });
    clearServerState(layout);
  }
  return { info: await startServer(located, opts, signal, emit), reused: false };
}

function lockTimeoutError(scopeMs: number, lockPath: string, cause: unknown): DeadlineExceededError {
  const owner = readTextFile(lockPath);
  let pid = 'another process';
  try {
    if (owner) pid = `pid ${(JSON.parse(owner) as { pid: number }).pid}`;
  } catch {
    // unreadable: keep the generic wording
  }
  return new DeadlineExceededError(
    `Timed out after ${scopeMs} ms waiting for the local gateway lock held by ${pid} (${lockPath})`,
    { timeoutMs: scopeMs, cause },
  );
}

/**
 * The embedded Jupyter server: one `jupyter-server` per user and interpreter, on 127.0.0.1 with a random token,
 * shared across processes through reference-counted leases, stopped after an idle linger.
 *
 * Use it when you want kernels without running a server yourself: `acquire()` a lease, pass it as the `gateway`
 * of `GatewayKernel.start()`, release it when done. `stop()` and `status()` serve the CLI.
 */
export class LocalGateway {
  /**
   * Starts the embedded server, or reuses the one already running for this user and interpreter, and takes a
   * lease on it. Kernels whose creating process has died are deleted before it returns.
   *
   * Rejects with `InvalidOptionsError` (naming the field), `LocalGatewayError`, `GatewayUnavailableError` (the
   * server would not start; its log's tail is in the message), a `TimeoutError` (`startupTimeoutMs`), or the
   * signal's reason.
   */
  static async acquire(options: LocalGatewayOptions = {}): Promise<LocalGatewayLease> {
    const opts = parseOptions(acquireSchema, options, 'LocalGateway.acquire options');
    const located = locate(opts);
    const { layout } = located;
    prepareDirs(layout);
    const emit = emitter(opts.onEvent);
    const startupTimeoutMs = opts.startupTimeoutMs ?? DEFAULT_STARTUP_TIMEOUT_MS;
    const lingerMs = opts.lingerMs ?? DEFAULT_LINGER_MS;
    const scope = abortScope({
      signal: opts.signal,
      timeoutMs: startupTimeoutMs,
      timeoutMessage: `The local gateway did not become available within ${startupTimeoutMs} ms; see ${layout.log}`,
    });
    let lock: HeldLock | undefined;
    let leaseFile: string | undefined;
    try {
      try {
        lock = await acquireLock(layout.lock, {
          signal: scope.signal,
          onWait: (owner) => emit({ type: 'lock-wait', ownerPid: owner.pid }),
          onTakeover: (previous) => emit({ type: 'lock-takeover', previousOwnerPid: previous?.pid }),
        });
      } catch (error) {
        if (scope.timedOut) throw lockTimeoutError(startupTimeoutMs, layout.lock, error);
        throw error;
      }
      let info: ServerInfo;
      let reused: boolean;
      try {
        ({ info, reused } = await ensureServer(located, opts, scope.signal, emit));
        leaseFile = addLease(layout.leases, lingerMs);
        clearExpiredIdle(layout.idle);
        pruneKernelLogs(layout);
      } finally {
        lock.release();
      }
      await reapOrphanKernels({
        baseUrl: info.baseUrl,
        token: info.token,
        ownersDir: layout.owners,
        signal: scope.signal,
        requestTimeoutMs: opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
        onReaped: (kernelId, owner) => emit({ type: 'kernel-reaped', kernelId, ownerPid: owner.pid }),
        onFailed: (kernelId, message) => emit({ type: 'reap-failed', kernelId, message }),
      });
      return makeLease(layout, info, reused, leaseFile, lingerMs, opts.stopTimeoutMs ?? DEFAULT_STOP_GRACE_MS, emit);
    } catch (error) {
      if (leaseFile) await releaseLease(layout, leaseFile, lingerMs, DEFAULT_STOP_GRACE_MS, emit, undefined);
      throw error;
    } finally {
      scope.dispose();
    }
  }

  /**
   * Stops the embedded server now, whoever holds leases (SIGTERM, SIGKILL after `stopTimeoutMs`, then any kernel
   * process left), and clears its state. Resolves `{ stopped: false }` when none was running.
   */
  static async stop(options: LocalGatewayStopOptions = {}): Promise<{ stopped: boolean; pid?: number }> {
    const opts = parseOptions(stopSchema, options, 'LocalGateway.stop options');
    const { layout } = locate(opts);
    prepareDirs(layout);
    const lock = await acquireLock(layout.lock, { signal: opts.signal });
    try {
      const info = readServerInfo(layout.info);
      if (!info) {
        await stopServerProcess({ pid: -1 }, { runtimeDir: layout.runtime, graceMs: 0 });
        clearServerState(layout);
        return { stopped: false };
      }
      const wasAlive = isProcessAlive(info.server);
      await shutDownServer(layout, info, opts.stopTimeoutMs ?? DEFAULT_STOP_GRACE_MS);
      return wasAlive ? { stopped: true, pid: info.server.pid } : { stopped: false };
    } finally {
      lock.release();
    }
  }

  /** Reports whether the embedded server runs, where, who holds leases and which kernels it has. Read-only. */
  static async status(options: LocalGatewayLocation = {}): Promise<LocalGatewayStatus> {
    const opts = parseOptions(locationSchema, options, 'LocalGateway.status options');
    const { layout, server } = locate(opts);
    const base = { stateDir: layout.dir, command: server.command, interpreter: server.interpreter };
    const info = readServerInfo(layout.info);
    const holders = liveLeases(layout.leases).map((l) => ({ pid: l.pid, acquiredAt: l.acquiredAt }));
    if (!info || unverifiedServerReason(layout, info) !== undefined) {
      return { running: false, ...base, holders, kernels: [] };
    }
    let kernels: LocalGatewayStatus['kernels'] = [];
    let running = false;
    try {
      const listed = await withDeadline(
        async (signal) => {
          const res = await fetch(`${info.baseUrl}/api/kernels`, {
            headers: { Authorization: `token ${info.token}` },
            signal,
          });
          if (!res.ok) throw new Error(`HTTP ${res.status}`);
          return (await res.json()) as { id: string; name: string; execution_state?: string }[];
        },
        { signal: opts.signal, timeoutMs: DEFAULT_REQUEST_TIMEOUT_MS },
      );
      running = true;
      const owners = new Map(listOwners(layout.owners).map((r) => [r.kernelId, r.owner] as const));
      kernels = listed.map((k) => {
        const owner: ProcessIdentity | undefined = owners.get(k.id);
        return {
          id: k.id,
          name: k.name,
          ...(k.execution_state === undefined ? {} : { executionState: k.execution_state }),
          ...(owner ? { ownerPid: owner.pid, ownerAlive: isProcessAlive(owner) } : {}),
        };
      });
    } catch {
      opts.signal?.throwIfAborted();
    }
    return {
      running,
      ...base,
      baseUrl: info.baseUrl,
      pid: info.server.pid,
      startedAt: info.startedAt,
      holders,
      kernels,
    };
  }
}

async function releaseLease(
  layout: GatewayLayout,
  leaseFile: string,
  lingerMs: number,
  graceMs: number,
  emit: (event: LocalGatewayEvent) => void,
  signal: AbortSignal | undefined,
): Promise<void> {
  const lock = await acquireLock(layout.lock, { signal });
  try {
    removeFile(leaseFile);
    if (liveLeases(layout.leases).length > 0) return;
    // A linger promised by an earlier release (e.g. `gateway start` for an hour) outlives a shorter one, even 0.
    if (lingerMs > 0 || lingerPending(layout.idle)) {
      markIdle(layout.idle, lingerMs);
      return;
    }
    const info = readServerInfo(layout.info);
    if (!info) return;
    await shutDownServer(layout, info, graceMs);
    emit({ type: 'server-stopped', pid: info.server.pid, reason: 'last-release' });
  } finally {
    lock.release();
  }
}

function makeLease(
  layout: GatewayLayout,
  info: ServerInfo,
  reused: boolean,
  leaseFile: string,
  lingerMs: number,
  graceMs: number,
  emit: (event: LocalGatewayEvent) => void,
): LocalGatewayLease {
  let released: Promise<void> | undefined;
  const release = (opts: { signal?: AbortSignal } = {}) => {
    released ??= releaseLease(layout, leaseFile, lingerMs, graceMs, emit, opts.signal).catch((error: unknown) => {
      released = undefined;
      throw error;
    });
    return released;
  };
  const ownership: KernelOwnership = {
    created: (id) => {
      recordOwner(layout.owners, id);
    },
    deleted: (id) => forgetOwner(layout.owners, id),
  };
  const lease: LocalGatewayLease = {
    baseUrl: info.baseUrl,
    token: info.token,
    kernelSpecDir: layout.kernelSpecDir,
    stateDir: layout.dir,
    pid: info.server.pid,
    reused,
    ownership,
    diagnostics: kernelDiagnostics({ runtimeDir: layout.runtime, kernelLogDir: layout.kernelLogs }, info.token),
    ...guardedTransport(info.baseUrl, info.port, info.server.pid),
    release,
    [Symbol.asyncDispose]: () => release(),
  };
  // Keep the token out of accidental logging (JSON.stringify, console.log / util.inspect); spreads still copy it.
  const redacted = () => ({
    baseUrl: info.baseUrl,
    token: '<redacted>',
    kernelSpecDir: layout.kernelSpecDir,
    stateDir: layout.dir,
    pid: info.server.pid,
    reused,
  });
  Object.defineProperty(lease, 'toJSON', { value: redacted, enumerable: false });
  Object.defineProperty(lease, Symbol.for('nodejs.util.inspect.custom'), { value: redacted, enumerable: false });
  return lease;
}
