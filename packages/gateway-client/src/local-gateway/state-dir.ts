import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { dirname } from 'node:path';

/** Creates `dir` (and missing parents) readable by this user only; an existing directory is tightened to 0700. */
export function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

/**
 * Writes `text` to `path` with mode 0600, atomically: a reader sees the old content or the new, never a part.
 * (A temporary file in the same directory, created 0600 and exclusive, fsynced, then renamed over `path`.)
 */
export function writePrivateFileAtomic(path: string, text: string): void {
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    renameSync(tmp, path);
  } catch (error) {
    removeFile(tmp);
    throw error;
  }
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
