import { join } from 'node:path';

/** Where each file of one embedded gateway lives, under its state directory. */
export interface GatewayLayout {
  /** The gateway's state directory (0700). */
  dir: string;
  /** Exclusive lock serialising start, reuse, release and stop. */
  lock: string;
  /** `server.json`: url, pid, token (0600). */
  info: string;
  /** `launchers.json`, written by the server: its kernel launchers and how each kernel started (`gateway status`). */
  launchers: string;
  /** Read once by jupyter-server at start-up (`JUPYTER_TOKEN_FILE`), removed once it is ready. */
  tokenFile: string;
  /** One file per ticket holder. */
  tickets: string;
  /** Written when the last ticket is released: when the linger started and how long it is. */
  idle: string;
  /** One file per kernel, named by kernel id, holding the creating process. */
  owners: string;
  /** `JUPYTER_RUNTIME_DIR` of the server (connection files). */
  runtime: string;
  /** On the server's `JUPYTER_PATH`. */
  data: string;
  /** `<data>/kernels`: a kernelspec folder written here is launchable by name at once. */
  kernelSpecDir: string;
  /** `JUPYTER_CONFIG_DIR` of the server, ours alone, so a user config cannot weaken it. */
  config: string;
  /** `<config>/jupyter_server_config.py`, written at every start: loads the Python package below. */
  serverConfig: string;
  /** The server's copy of the `kernelwarden_gateway` Python package, first on its `sys.path`, made at every start. */
  python: string;
  /** The server's stdout and stderr (its own records only: kernels write to `kernelLogs`). */
  log: string;
  /** One stdout/stderr log per kernel, `<kernel id>.log` (0600). */
  kernelLogs: string;
  /** The kernels' ZMQ ipc sockets, one directory per kernel, when this path is short enough for a socket name. */
  ipc: string;
  /** The linger watcher's log. */
  watcherLog: string;
  /** The warm pool: `<pool>/<kernelspec>/<kernel id>` per ready kernel, `config.json` (the wanted counts). */
  pool: string;
  /** A pooled kernel being claimed: `<kernel id>~<claimant pid>~<its start time>`, until its owner is recorded. */
  poolClaims: string;
  /** Kernelspecs pooled like another (an isolated spec like its base): `<kernelspec>` holding `{ like, at }`. */
  poolKept: string;
}

/** The layout of the gateway whose state directory is `dir`. */
export function gatewayLayout(dir: string): GatewayLayout {
  const data = join(dir, 'jupyter-data');
  return {
    dir,
    lock: join(dir, 'lock'),
    info: join(dir, 'server.json'),
    launchers: join(dir, 'launchers.json'),
    tokenFile: join(dir, 'token'),
    tickets: join(dir, 'tickets'),
    idle: join(dir, 'idle.json'),
    owners: join(dir, 'owners'),
    runtime: join(dir, 'runtime'),
    data,
    kernelSpecDir: join(data, 'kernels'),
    config: join(dir, 'jupyter-config'),
    serverConfig: join(dir, 'jupyter-config', 'jupyter_server_config.py'),
    python: join(dir, 'python'),
    log: join(dir, 'server.log'),
    kernelLogs: join(dir, 'kernel-logs'),
    ipc: join(dir, 'ipc'),
    watcherLog: join(dir, 'linger-watcher.log'),
    pool: join(dir, 'pool'),
    poolClaims: join(dir, 'pool-claims'),
    poolKept: join(dir, 'pool-kept'),
  };
}
