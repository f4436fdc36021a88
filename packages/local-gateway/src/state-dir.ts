import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { writeFileAtomic } from '@kernelwarden/core';

/** Creates `dir` (and missing parents) readable by this user only; an existing directory is tightened to 0700. */
export function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

/**
 * Writes `text` to `path` with mode 0600, atomically (core's `writeFileAtomic`): a reader sees the old content or the
 * new, never a part. Not fsynced: every file here describes processes of this boot (a server, tickets, kernels, the
 * pool), which a crash of the machine ends too, and each is verified against the live processes before it is
 * trusted; an fsync cost a command up to 10 ms.
 */
export function writePrivateFileAtomic(path: string, text: string): void {
  writeFileAtomic(path, text, { mode: 0o600 });
}

/** Creates the temporary sibling of `path` that `link()`-based exclusive creation uses. */
export function writePrivateTempFile(path: string, text: string): string {
  const tmp = `${dirname(path)}/.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
  return tmp;
}

/** The file's text, or undefined when it does not exist or cannot be read. */
export function readTextFile(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** The file's JSON, or undefined when it is missing or not JSON. */
export function readJsonFile(path: string): unknown {
  const text = readTextFile(path);
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** Removes `path`; a missing file is not an error. */
export function removeFile(path: string): void {
  try {
    unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

/** Why a directory is not safe to keep secrets in; undefined when it is. */
export function unsafeDirectoryReason(dir: string, uid = process.getuid?.() ?? -1): string | undefined {
  let real: string;
  try {
    real = realpathSync(dir);
  } catch {
    return `${dir} cannot be resolved`;
  }
  const own = lstatSync(real);
  if (!own.isDirectory()) return `${real} is not a directory`;
  if (uid >= 0 && own.uid !== uid) return `${real} belongs to uid ${own.uid}, not to this user (uid ${uid})`;
  if ((own.mode & 0o077) !== 0) return `${real} is accessible to other users (mode ${(own.mode & 0o777).toString(8)})`;
  // Every ancestor must be owned by this user or root, and not writable by others unless sticky (like /tmp):
  // otherwise another user could move the directory away and put one of their own in its place.
  for (let current = dirname(real); ; current = dirname(current)) {
    const st = lstatSync(current);
    if (uid >= 0 && st.uid !== uid && st.uid !== 0) return `${current} belongs to uid ${st.uid}`;
    if ((st.mode & 0o022) !== 0 && (st.mode & 0o1000) === 0) {
      return `${current} is writable by other users (mode ${(st.mode & 0o7777).toString(8)})`;
    }
    if (current === dirname(current)) return undefined;
  }
}

/** The most symbolic links `canonicalPrivatePath` follows (Linux's own limit for one path lookup). */
const MAX_LINKS = 40;

/**
 * The canonical form of `path` (absolute; its tail may not exist yet), or why the way to it is not safe: every
 * directory and symbolic link on it — those the links lead through included — must belong to this user or root, and
 * no directory on it may be writable by other users unless it is sticky (like /tmp, where others cannot move what
 * is ours). A link or directory another user could change or replace would let them swap the whole tree below it at
 * any moment, so such a path is refused, not resolved once and trusted. Missing components are left as named (the
 * caller creates them, 0700).
 */
export function canonicalPrivatePath(
  path: string,
  uid = process.getuid?.() ?? -1,
): { path: string; reason?: undefined } | { path?: undefined; reason: string } {
  let pending = resolve(path).split('/').filter(Boolean);
  let current = '/';
  let links = 0;
  while (pending.length > 0) {
    const name = pending.shift() as string;
    if (name === '.') continue;
    if (name === '..') {
      current = dirname(current);
      continue;
    }
    const next = join(current, name);
    let st: ReturnType<typeof lstatSync>;
    try {
      st = lstatSync(next);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { path: join(next, ...pending) };
      return { reason: `${next} cannot be examined (${(error as Error).message})` };
    }
    if (uid >= 0 && st.uid !== uid && st.uid !== 0) {
      return { reason: `${next} belongs to uid ${st.uid}, another user, who could replace what lies below it` };
    }
    if (st.isSymbolicLink()) {
      if (++links > MAX_LINKS) return { reason: `${path} goes through more than ${MAX_LINKS} symbolic links` };
      const target = readlinkSync(next);
      if (target.startsWith('/')) current = '/';
      pending = [...target.split('/').filter(Boolean), ...pending];
      continue;
    }
    if (!st.isDirectory()) return { reason: `${next} is not a directory` };
    if ((st.mode & 0o022) !== 0 && (st.mode & 0o1000) === 0) {
      return { reason: `${next} is writable by other users (mode ${(st.mode & 0o7777).toString(8)})` };
    }
    current = next;
  }
  return { path: current };
}

/** Why a file is not safe to trust (a secret's holder written by us); undefined when it is. */
export function unsafeFileReason(path: string, uid = process.getuid?.() ?? -1): string | undefined {
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(path);
  } catch {
    return `${path} cannot be read`;
  }
  if (!st.isFile()) return `${path} is not a regular file`;
  if (uid >= 0 && st.uid !== uid) return `${path} belongs to uid ${st.uid}, not to this user (uid ${uid})`;
  if ((st.mode & 0o077) !== 0) return `${path} is accessible to other users (mode ${(st.mode & 0o777).toString(8)})`;
  return undefined;
}
