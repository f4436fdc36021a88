import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, openSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';

/** A jupyter-server started for tests: loopback, random port and token, its own runtime dir. */
export interface TestServer {
  baseUrl: string;
  token: string;
  /** Every file and process of this server lives under this directory. */
  root: string;
  runtimeDir: string;
  logFile: string;
  pid: number;
  stop(): Promise<void>;
}

/** Finds a free loopback port (listen on port 0, close, hand the number over). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      srv.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** Options of `startTestServer`. */
export interface StartTestServerOptions {
  root: string;
  /** Extra `--ServerApp.x=y` style arguments. */
  args?: string[];
  env?: Record<string, string>;
  readyTimeoutMs?: number;
}

/**
 * The jupyter-server the tests run: `KERNELWARDEN_JUPYTER_SERVER` (a path, or a name on PATH) when set, else
 * `jupyter-server` on PATH. CI runs the suite once per stack by setting it (see the root README).
 */
export function testServerCommand(): string {
  return process.env.KERNELWARDEN_JUPYTER_SERVER || 'jupyter-server';
}

/** Starts `jupyter-server` on 127.0.0.1 and waits until `/api/status` answers with the token. */
export async function startTestServer(opts: StartTestServerOptions): Promise<TestServer> {
  const { root } = opts;
  const runtimeDir = join(root, 'runtime');
  const notebookDir = join(root, 'notebooks');
  mkdirSync(runtimeDir, { recursive: true });
  mkdirSync(notebookDir, { recursive: true });
  const token = randomBytes(24).toString('hex');
  const port = await freePort();
  const logFile = join(root, 'server.log');
  const log = openSync(logFile, 'a');
  const child: ChildProcess = spawn(
    testServerCommand(),
    [
      '--allow-root',
      '--no-browser',
      '--ip=127.0.0.1',
      `--port=${port}`,
      '--port-retries=0',
      `--ServerApp.root_dir=${notebookDir}`,
      '--ServerApp.open_browser=False',
      ...(opts.args ?? []),
    ],
    {
      stdio: ['ignore', log, log],
      env: {
        ...process.env,
        JUPYTER_TOKEN: token,
        JUPYTER_RUNTIME_DIR: runtimeDir,
        JUPYTER_CONFIG_DIR: join(root, 'config'),
        JUPYTER_DATA_DIR: join(root, 'data'),
        ...opts.env,
      },
      detached: false,
    },
  );
  const baseUrl = `http://127.0.0.1:${port}`;
  let exited = false;
  let spawnError: Error | undefined;
  child.once('exit', () => {
    exited = true;
  });
  child.once('error', (error) => {
    spawnError = error;
    exited = true;
  });
  const deadline = Date.now() + (opts.readyTimeoutMs ?? 60_000);
  for (;;) {
    if (spawnError) {
      throw new Error(`Cannot run ${testServerCommand()} (KERNELWARDEN_JUPYTER_SERVER): ${spawnError.message}`);
    }
    if (exited) throw new Error(`jupyter-server exited during start-up; see ${logFile}`);
    try {
      const res = await fetch(`${baseUrl}/api/status`, { headers: { Authorization: `token ${token}` } });
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`jupyter-server did not become ready; see ${logFile}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    baseUrl,
    token,
    root,
    runtimeDir,
    logFile,
    pid: child.pid ?? -1,
    async stop() {
      if (exited) return;
      const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await gone;
      clearTimeout(timer);
    },
  };
}
