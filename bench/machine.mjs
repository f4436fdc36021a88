// The machine line of the report: CPU model, cores, load, Node, jupyter-server and the kernel's Python stack.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { FLOOR_PYTHON } from './zmq-floor.mjs';

function cpuModel() {
  try {
    const match = readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.+)$/m);
    if (match) return match[1].trim();
  } catch {
    // not Linux
  }
  return cpus()[0]?.model ?? 'unknown';
}

function pythonVersions() {
  try {
    const out = execFileSync(
      FLOOR_PYTHON,
      [
        '-c',
        'import json, sys, jupyter_server, tornado, jupyter_client, ipykernel; print(json.dumps({"jupyterServer": jupyter_server.__version__, "tornado": tornado.version, "jupyterClient": jupyter_client.__version__, "ipykernel": ipykernel.__version__, "python": sys.version.split()[0]}))',
      ],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
    );
    return JSON.parse(out);
  } catch {
    return {};
  }
}

function packageVersion(name) {
  try {
    return JSON.parse(readFileSync(new URL(`../node_modules/${name}/package.json`, import.meta.url), 'utf8')).version;
  } catch {
    return 'unknown';
  }
}

/** What the figures were measured on. */
export function describeMachine() {
  return {
    cpu: cpuModel(),
    cores: cpus().length,
    loadAverage1m: Number(loadavg()[0].toFixed(2)),
    node: process.version,
    ws: packageVersion('ws'),
    jupyterlabServices: packageVersion('@jupyterlab/services'),
    ...pythonVersions(),
  };
}

/** One line for the table's header. */
export function machineLine(m) {
  return (
    `machine: ${m.cpu}, ${m.cores} cores (load ${m.loadAverage1m} at start), Node ${m.node}, ` +
    `jupyter-server ${m.jupyterServer ?? '?'} (tornado ${m.tornado ?? '?'}), ipykernel ${m.ipykernel ?? '?'}, ` +
    `jupyter_client ${m.jupyterClient ?? '?'}, Python ${m.python ?? '?'}, ws ${m.ws}, @jupyterlab/services ${m.jupyterlabServices}`
  );
}
