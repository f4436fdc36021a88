import { createHash } from 'node:crypto';
import { accessSync, closeSync, constants, openSync, readSync, realpathSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve } from 'node:path';

/** The jupyter-server to run and the interpreter it runs on: together with the uid, they key the state. */
export interface ServerCommand {
  /** Canonical path of the `jupyter-server` executable. */
  command: string;
  /**
   * The interpreter named by its shebang (the command itself when it has none), as named there or found on PATH:
   * not resolved through symbolic links, since a venv's `bin/python` links to a base interpreter that lacks the
   * venv's packages.
   */
  interpreter: string;
  /** Short stable key: sha256 of uid, command and interpreter. */
  key: string;
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Finds `name` on PATH (or resolves it when it holds a slash); undefined when absent. */
export function findExecutable(name: string, path = process.env.PATH ?? ''): string | undefined {
  if (name.includes('/')) {
    const abs = isAbsolute(name) ? name : resolve(name);
    return isExecutable(abs) ? abs : undefined;
  }
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

function shebang(path: string): string[] | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    const buffer = Buffer.alloc(256);
    const n = readSync(fd, buffer, 0, buffer.length, 0);
    const head = buffer.subarray(0, n).toString('utf8');
    if (!head.startsWith('#!')) return undefined;
    return head.slice(2).split('\n')[0]?.trim().split(/\s+/);
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function canonical(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/**
 * Resolves the jupyter-server executable and its interpreter (`#!/usr/bin/env python3` is followed through PATH);
 * undefined when the executable is not found.
 */
export function resolveServerCommand(name: string): ServerCommand | undefined {
  const found = findExecutable(name);
  if (!found) return undefined;
  const command = canonical(found);
  const bang = shebang(command);
  let interpreter = command;
  if (bang?.[0]) {
    if (bang[0].endsWith('/env')) {
      const program = bang.slice(1).find((arg) => !arg.startsWith('-'));
      const located = program ? findExecutable(program) : undefined;
      if (located) interpreter = located;
    } else {
      interpreter = bang[0];
    }
  }
  const uid = typeof process.getuid === 'function' ? process.getuid() : 0;
  const key = createHash('sha256').update(`${uid}\0${command}\0${interpreter}`).digest('hex').slice(0, 16);
  return { command, interpreter, key };
}
