import { closeSync, existsSync, openSync, readSync } from 'node:fs';
import { basename, isAbsolute, resolve } from 'node:path';
import { findExecutable } from './sandbox.js';

/** The argv[0] values jupyter replaces with its own interpreter (`python`, `python3`, `python3.11`, ...). */
const BARE_PYTHON = /^python(\d+(\.\d+)?)?$/;

function shebang(file: string): string[] | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    const buffer = Buffer.alloc(256);
    const read = readSync(fd, buffer, 0, buffer.length, 0);
    const first = buffer.subarray(0, read).toString('utf8').split('\n')[0] ?? '';
    return first.startsWith('#!') ? first.slice(2).trim().split(/\s+/) : undefined;
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * The jupyter-server executable the gateway runs: `KERNELWARDEN_JUPYTER_SERVER` (a path, or a name looked up on the
 * search path) when set, else `jupyter-server` on the search path.
 */
function jupyterServerExecutable(searchPath: string | undefined): string | undefined {
  const chosen = process.env.KERNELWARDEN_JUPYTER_SERVER || 'jupyter-server';
  if (!chosen.includes('/')) return findExecutable(chosen, searchPath);
  const path = resolve(chosen);
  return existsSync(path) ? path : undefined;
}

/**
 * The interpreter `jupyter-server` runs on (its shebang, `#!/usr/bin/env python3` followed through the search path),
 * which is what jupyter puts in place of a bare `python` in a kernelspec; undefined when it cannot be told.
 *
 * The path is kept as the shebang or the search path names it, never resolved through symbolic links: a venv's or
 * conda env's `bin/python` is often a link to a base interpreter, and only the link's own path makes Python find
 * the environment (`pyvenv.cfg` beside it) and its packages. The resolved base has no ipykernel.
 */
export function jupyterServerInterpreter(searchPath: string | undefined): string | undefined {
  const server = jupyterServerExecutable(searchPath);
  if (!server) return undefined;
  const line = shebang(server);
  if (!line || line.length === 0) return undefined;
  let command = line[0]!;
  if (command.endsWith('/env')) {
    const named = line.slice(1).find((a) => !a.startsWith('-'));
    command = named ? (findExecutable(named, searchPath) ?? '') : '';
  }
  if (!command || !isAbsolute(command) || !existsSync(command)) return undefined;
  return command;
}

/**
 * Does for a wrapped kernelspec what jupyter does for a plain one: a bare `python`/`python3` as `argv[0]` becomes the
 * gateway's own interpreter (`pythonExecutable`, else the one `jupyter-server` on the search path runs on). Inside
 * the sandbox jupyter no longer sees `argv[0]`, so without this a pip-installed spec (`"python"`) would run whatever
 * `python` PATH finds there, if any.
 */
export function resolveKernelArgv(
  argv: readonly string[],
  opts: { pythonExecutable?: string | undefined; searchPath?: string | undefined },
): string[] {
  const [first, ...rest] = argv;
  if (first === undefined || !BARE_PYTHON.test(first)) return [...argv];
  const python = opts.pythonExecutable ?? jupyterServerInterpreter(opts.searchPath);
  return python ? [python, ...rest] : [...argv];
}

/** The flags every R kernel starts with: no `.Rprofile`, `.Renviron` or `.RData` of its working directory or user. */
export const R_SAFE_LAUNCH_FLAGS: readonly string[] = Object.freeze(['--no-init-file', '--no-environ', '--no-restore']);

/**
 * The argv of a kernel that reads nothing of its working directory at launch: an R kernel (one running
 * `IRkernel::main()`) gets `R_SAFE_LAUNCH_FLAGS` after its `R`. (A Python kernel's launch is made safe by the gateway
 * that starts it: LocalGateway boots IPython with `PYTHONSAFEPATH`.)
 */
export function safeLaunchArgv(argv: readonly string[]): string[] {
  const out = [...argv];
  const main = out.findIndex((arg) => arg.includes('IRkernel::main'));
  if (main < 0) return out;
  for (let k = main - 1; k >= 0; k--) {
    if (basename(out[k]!) === 'R') {
      const missing = R_SAFE_LAUNCH_FLAGS.filter((flag) => !out.slice(k + 1, main).includes(flag));
      out.splice(k + 1, 0, ...missing);
      break;
    }
  }
  return out;
}
