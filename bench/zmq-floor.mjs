// Drives bench/zmq_floor.py (jupyter_client over ZMQ, no gateway: the kernel's own floor) from Node, in lockstep so
// its cells can be alternated with the other clients' cells.
import { spawn } from 'node:child_process';
import { mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { serverPython } from './jupyter-servers.mjs';

const SCRIPT = new URL('./zmq_floor.py', import.meta.url).pathname;
export const FLOOR_PYTHON = serverPython();

function spawnFloor(args, dir) {
  const runtimeDir = join(dir, 'runtime');
  mkdirSync(runtimeDir, { recursive: true });
  const log = openSync(join(dir, 'zmq-floor.log'), 'a');
  const child = spawn(FLOOR_PYTHON, [SCRIPT, ...args], {
    stdio: ['pipe', 'pipe', log],
    env: { ...process.env, JUPYTER_RUNTIME_DIR: runtimeDir, PYDEVD_DISABLE_FILE_VALIDATION: '1' },
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  async function next() {
    const { value, done } = await lines.next();
    if (done) {
      const { code, signal } = await exited;
      throw new Error(`zmq_floor.py exited (${signal ?? code}); see ${join(dir, 'zmq-floor.log')}`);
    }
    return JSON.parse(value);
  }
  return { child, next, exited, runtimeDir };
}

/** A warm python3 kernel driven by jupyter_client; `cell()` runs one `code` cell. */
export class ZmqFloor {
  #proc;

  constructor(proc) {
    this.#proc = proc;
  }

  get pid() {
    return this.#proc.child.pid;
  }

  static async start({ dir, code = '1', warmup = 20 }) {
    const proc = spawnFloor(['roundtrip', '--code', code, '--warmup', String(warmup)], dir);
    const ready = await proc.next();
    if (!ready.ready) throw new Error(`zmq_floor.py: unexpected ${JSON.stringify(ready)}`);
    return new ZmqFloor(proc);
  }

  /** Runs one cell; resolves to its wall time and the client process's CPU time for it (ms). */
  async cell() {
    this.#proc.child.stdin.write('cell\n');
    const { ms, cpuMs } = await this.#proc.next();
    return { ms, cpuMs };
  }

  /** Shuts the kernel down and resolves to every time the script measured. */
  async close() {
    if (this.#proc.child.exitCode !== null) return [];
    this.#proc.child.stdin.end('quit\n');
    const { times } = await this.#proc.next();
    await this.#proc.exited;
    return times;
  }

  kill() {
    if (this.#proc.child.exitCode === null) this.#proc.child.kill('SIGTERM');
  }
}

/**
 * Runs a big-output cell `reps` times through jupyter_client in its own process (clean RSS); see zmq_floor.py.
 * Past `timeoutMs` the script gets SIGINT (it then shuts its kernel down) and this rejects with `timedOut: true`.
 */
export async function zmqOutputCell({ dir, code, reps, expectLines = 0, timeoutMs }) {
  const proc = spawnFloor(
    ['output', '--code', code, '--reps', String(reps), '--expect-lines', String(expectLines)],
    dir,
  );
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.child.kill('SIGINT');
  }, timeoutMs);
  try {
    const result = await proc.next();
    await proc.exited; // the script shuts its kernel down before it exits
    return result;
  } catch (error) {
    if (timedOut)
      throw Object.assign(new Error(`did not finish within ${timeoutMs / 1000} s`), { timedOut, cause: error });
    throw error;
  } finally {
    clearTimeout(timer);
    if (proc.child.exitCode === null) {
      const exited = await Promise.race([proc.exited, new Promise((r) => setTimeout(r, 15_000, 'late'))]);
      // Only on failure: run.mjs's final sweep kills any kernel left under the bench's temp dir.
      if (exited === 'late') proc.child.kill('SIGKILL');
    }
  }
}
