import { randomBytes } from 'node:crypto';
import { chmodSync, readdirSync } from 'node:fs';
import { delimiter, join, resolve } from 'node:path';
import { isProcessAlive } from '@kernelwarden/core/os';
import { GatewayUnavailableError } from '@kernelwarden/gateway-client';
import { LocalGatewayError } from './errors.js';
import type { Emit } from './events.js';
import type { LocatedGateway } from './gateway-dir.js';
import { readServerInfo, type ServerInfo, writeServerInfo } from './info-file.js';
import { makeIpcDir, removeIpcDir } from './ipc-dir.js';
import type { GatewayLayout } from './layout.js';
import { spawnLingerWatcher } from './linger-watcher.js';
import { verifiedListenerInodes } from './listener.js';
import type { ResolvedLocalGatewayOptions } from './options.js';
import { installPythonPackage, serverConfigFile } from './python-package.js';
import { serverEnvironment } from './server-env.js';
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
} from './server-process.js';
import { shutDownServer, stopRecordedServer } from './server-shutdown.js';
import { unverifiedServerReason } from './server-verification.js';
import { readTextFile, removeFile, writePrivateFileAtomic } from './state-dir.js';

/** Ports tried before giving up when another process takes the one picked. */
const PORT_ATTEMPTS = 3;

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
    // names depend on the server's version (the iopub rate limits) are set by the kernelwarden_gateway Python package
    // its config file loads, with the iopub high-water mark.
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

/** One start attempt: its port, secrets and the server process spawned for it. */
interface StartAttempt {
  readonly port: number;
  readonly baseUrl: string;
  readonly token: string;
  readonly instance: string;
  readonly ipcDir: string;
  readonly configMarker: string;
  readonly logStart: number;
  readonly child: SpawnedProcess;
}

/** Picks a free port, writes the token and configuration files for a new server and spawns it. */
async function launchServer(
  { layout, server }: LocatedGateway,
  opts: ResolvedLocalGatewayOptions,
  emit: Emit,
): Promise<StartAttempt> {
  const port = await freeLoopbackPort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const token = randomBytes(32).toString('hex');
  const instance = randomBytes(8).toString('hex');
  const ipcDir = makeIpcDir(layout);
  const configMarker = join(layout.runtime, 'kernelwarden-config-loaded');
  removeFile(configMarker);
  writePrivateFileAtomic(layout.tokenFile, token);
  installPythonPackage(layout);
  writePrivateFileAtomic(
    layout.serverConfig,
    serverConfigFile(layout, {
      ...opts,
      instance,
      ipcDir,
      kernelLogDir: layout.kernelLogs,
      loadedMarker: configMarker,
      launcherStatusFile: layout.launchers,
    }),
  );
  rotateLog(layout.log);
  const logStart = fileSize(layout.log);
  emit({ type: 'server-starting', port, logFile: layout.log });
  const child: SpawnedProcess = spawnDetached(
    server.command,
    serverArgs(layout, port, { rootDir: opts.rootDir, extra: opts.serverArgs }),
    { env: serverEnv(layout, opts.jupyterPath, opts.serverEnv), logFile: layout.log, cwd: layout.dir },
  );
  return { port, baseUrl, token, instance, ipcDir, configMarker, logStart, child };
}

/**
 * Waits until the attempt's server is ready and removes the token file. `'retry'` when its port went to another
 * process and attempts are left (this attempt's leftovers already cleaned up); throws when the server cannot be used.
 */
async function awaitReadiness(
  started: StartAttempt,
  layout: GatewayLayout,
  attempt: number,
  signal: AbortSignal,
  emit: Emit,
): Promise<'ready' | 'retry'> {
  const { baseUrl, port, token, child, instance, ipcDir, logStart } = started;
  // Raw fetches until the server is known to be ours and ready: no client (or ticket) exists yet.
  const readiness = await waitUntilReady({ baseUrl, port, token, server: child, signal });
  removeFile(layout.tokenFile);
  if ('foreign' in readiness) {
    emit({ type: 'port-taken', port });
    if (attempt < PORT_ATTEMPTS) {
      await stopServerProcess(child.identity, { runtimeDir: layout.runtime, graceMs: 2_000, instance });
      removeIpcDir(layout, ipcDir);
      return 'retry';
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
      return 'retry';
    }
    throw new GatewayUnavailableError(
      `The local gateway's jupyter-server exited during start-up (${readiness.ended}); see ${layout.log}:\n${tail}`,
      { url: baseUrl },
    );
  }
  return 'ready';
}

/** Refuses a ready server that did not run its own configuration to the end or answers without the token. */
async function verifySafeguards(started: StartAttempt, layout: GatewayLayout, signal: AbortSignal): Promise<void> {
  const { baseUrl, token, instance, configMarker, logStart } = started;
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
}

/** Records the verified server in `server.json` and starts its linger watcher. */
function recordStartedServer(
  started: StartAttempt,
  { layout, server }: LocatedGateway,
  opts: ResolvedLocalGatewayOptions,
  emit: Emit,
): ServerInfo {
  const { baseUrl, port, token, instance, ipcDir, child } = started;
  const info: ServerInfo = {
    version: 1,
    baseUrl,
    port,
    token,
    server: child.identity,
    command: server.command,
    interpreter: server.interpreter,
    startedAt: new Date().toISOString(),
    lingerMs: opts.lingerMs,
    instance,
    ipcDir,
    listeners: verifiedListenerInodes(port, child.identity.pid),
  };
  tightenRuntimeFiles(layout);
  writeServerInfo(layout.info, info);
  info.watcher = spawnLingerWatcher({
    layout,
    info,
    defaultLingerMs: opts.lingerMs,
    graceMs: opts.stopTimeoutMs,
  }).identity;
  writeServerInfo(layout.info, info);
  emit({ type: 'server-ready', baseUrl, pid: child.identity.pid });
  return info;
}

/**
 * Starts a new server on a free loopback port and waits until it is ready, its token enforced and its watcher
 * running; records it in `server.json`. The caller holds the lock. On any failure the server is stopped again.
 */
async function startServer(
  located: LocatedGateway,
  opts: ResolvedLocalGatewayOptions,
  signal: AbortSignal,
  emit: Emit,
): Promise<ServerInfo> {
  const { layout } = located;
  for (let attempt = 1; ; attempt++) {
    const started = await launchServer(located, opts, emit);
    try {
      if ((await awaitReadiness(started, layout, attempt, signal, emit)) === 'retry') continue;
      await verifySafeguards(started, layout, signal);
      return recordStartedServer(started, located, opts, emit);
    } catch (error) {
      removeFile(layout.tokenFile);
      await stopServerProcess(started.child.identity, {
        runtimeDir: layout.runtime,
        graceMs: 2_000,
        instance: started.instance,
      });
      removeIpcDir(layout, started.ipcDir);
      throw error;
    }
  }
}

/**
 * The running server of this gateway, reused when it is verifiably ours and healthy (its watcher restarted if it
 * died), else a new one: a recorded server that is unhealthy is stopped first, and leftovers of a vanished one are
 * swept. The caller holds the lock. `requestedLingerMs` is the caller's own `lingerMs`, if it gave one: a restarted
 * watcher otherwise keeps the linger of the server's starter.
 */
export async function ensureServer(
  located: LocatedGateway,
  opts: ResolvedLocalGatewayOptions,
  requestedLingerMs: number | undefined,
  signal: AbortSignal,
  emit: Emit,
): Promise<{ info: ServerInfo; reused: boolean }> {
  const { layout } = located;
  const recorded = readServerInfo(layout.info);
  const untrusted = recorded ? unverifiedServerReason(layout, recorded) : undefined;
  if (recorded && untrusted && isProcessAlive(recorded.server)) emit({ type: 'server-untrusted', reason: untrusted });
  if (recorded && !untrusted) {
    // A raw health check: it decides whether there is a server to give a client to at all.
    if (await answersStatus(recorded.baseUrl, recorded.token, signal, opts.requestTimeoutMs)) {
      if (!recorded.watcher || !isProcessAlive(recorded.watcher)) {
        recorded.watcher = spawnLingerWatcher({
          layout,
          info: recorded,
          defaultLingerMs: requestedLingerMs ?? recorded.lingerMs,
          graceMs: opts.stopTimeoutMs,
        }).identity;
        writeServerInfo(layout.info, recorded);
      }
      emit({ type: 'server-reused', baseUrl: recorded.baseUrl, pid: recorded.server.pid });
      return { info: recorded, reused: true };
    }
    emit({ type: 'server-stopped', pid: recorded.server.pid, reason: 'unhealthy' });
  }
  if (recorded) await shutDownServer(layout, recorded, opts.stopTimeoutMs);
  else await stopRecordedServer(layout, undefined, 0);
  return { info: await startServer(located, opts, signal, emit), reused: false };
}
