// The bench's own jupyter-servers: loopback, a free port, a random token (env JUPYTER_TOKEN), and every runtime,
// config and data file in a temp dir. `stop()` deletes every kernel the server lists, stops the server (SIGTERM,
// then SIGKILL) and kills any kernel process still naming the server's runtime dir. The jupyter-server is the one
// the tests use: KERNELWARDEN_JUPYTER_SERVER (a path or a name on PATH), else `jupyter-server` on PATH.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

export const NODELAY_CONFIG = new URL('./nodelay/jupyter_server_config.py', import.meta.url).pathname;
export const SERVER_COMMAND = process.env.KERNELWARDEN_JUPYTER_SERVER || 'jupyter-server';

/**
 * The interpreter the bench's jupyter-server runs on (its shebang): the ZMQ floor and the machine line use it too, so
 * that every figure comes from one stack. Falls back to /usr/bin/python3.
 */
export function serverPython() {
  try {
    const path = SERVER_COMMAND.includes('/')
      ? SERVER_COMMAND
      : execFileSync('sh', ['-c', 'command -v "$0"', SERVER_COMMAND], { encoding: 'utf8' }).trim();
    const words = readFileSync(path, 'utf8').split('\n', 1)[0].replace(/^#!/, '').trim().split(/\s+/);
    const python = words[0].endsWith('/env')
      ? execFileSync('sh', ['-c', 'command -v "$0"', words[1]], { encoding: 'utf8' }).trim()
      : words[0];
    if (python) return python;
  } catch {
    // no shebang to read
  }
  return '/usr/bin/python3';
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Pids of live processes whose command line contains `needle`. */
export function processesMentioning(needle) {
  const pids = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(needle)) pids.push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}

/**
 * Starts `jupyter-server` under `root` and waits until `/api/status` answers. `configPy` becomes the
 * `jupyter_server_config.py` of its own config dir.
 * @param {{ name: string, root: string, args?: string[], configPy?: string }} opts
 */
export async function startServer({ name, root, args = [], configPy }) {
  const dir = join(root, name);
  const runtimeDir = join(dir, 'runtime');
  for (const sub of ['runtime', 'notebooks', 'config', 'data']) mkdirSync(join(dir, sub), { recursive: true });
  if (configPy !== undefined) writeFileSync(join(dir, 'config', 'jupyter_server_config.py'), configPy);
  const token = randomBytes(24).toString('hex');
  const port = await freePort();
  const logFile = join(dir, 'server.log');
  const log = openSync(logFile, 'a');
  const child = spawn(
    SERVER_COMMAND,
    [
      '--no-browser',
      '--allow-root',
      '--ip=127.0.0.1',
      `--port=${port}`,
      '--port-retries=0',
      `--ServerApp.root_dir=${join(dir, 'notebooks')}`,
      ...args,
    ],
    {
      stdio: ['ignore', log, log],
      env: {
        ...process.env,
        JUPYTER_TOKEN: token,
        JUPYTER_RUNTIME_DIR: runtimeDir,
        JUPYTER_CONFIG_DIR: join(dir, 'config'),
        JUPYTER_DATA_DIR: join(dir, 'data'),
        PYDEVD_DISABLE_FILE_VALIDATION: '1',
      },
    },
  );
  let exited = false;
  const gone = new Promise((resolve) => child.once('exit', resolve)).then(() => {
    exited = true;
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  const headers = { Authorization: `token ${token}` };
  const server = {
    name,
    baseUrl,
    token,
    runtimeDir,
    logFile,
    pid: child.pid,
    async stop() {
      if (!exited) {
        try {
          const res = await fetch(`${baseUrl}/api/kernels`, { headers, signal: AbortSignal.timeout(5000) });
          const kernels = res.ok ? await res.json() : [];
          await Promise.all(
            kernels.map((k) =>
              fetch(`${baseUrl}/api/kernels/${k.id}`, {
                method: 'DELETE',
                headers,
                signal: AbortSignal.timeout(15_000),
              }).catch(() => {}),
            ),
          );
        } catch {
          // the server is not answering; SIGTERM below still shuts its kernels down
        }
        child.kill('SIGTERM');
        await Promise.race([gone, delay(10_000)]);
        if (!exited) child.kill('SIGKILL');
        await gone;
      }
      for (const pid of processesMentioning(runtimeDir)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    },
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (exited) throw new Error(`jupyter-server "${name}" exited during start-up; see ${logFile}`);
    try {
      const res = await fetch(`${baseUrl}/api/status`, { headers });
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await server.stop();
      throw new Error(`jupyter-server "${name}" did not become ready in 60 s; see ${logFile}`);
    }
    await delay(100);
  }
  return server;
}

/** Lists the kernels a server knows (used to check nothing is left before stopping). */
export async function listKernels(server) {
  const res = await fetch(`${server.baseUrl}/api/kernels`, { headers: { Authorization: `token ${server.token}` } });
  return res.ok ? res.json() : [];
}
