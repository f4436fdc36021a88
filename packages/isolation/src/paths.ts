import { lstatSync } from 'node:fs';
import { isAbsolute, resolve, sep } from 'node:path';

/** What walking a path component by component (without following links) found. */
export type PathInspection =
  | { kind: 'directory'; path: string }
  | { kind: 'not-directory'; path: string }
  | { kind: 'symlink'; path: string; at: string }
  | { kind: 'missing'; path: string; at: string };

/**
 * Walks `path` from `/` down with `lstat`, so a symbolic link anywhere on the way is seen rather than followed.
 * Reads only; never creates anything.
 */
export function inspectPath(path: string): PathInspection {
  const normal = resolve(path);
  const parts = normal.split(sep).filter(Boolean);
  let current = '';
  for (const part of parts) {
    current += sep + part;
    let stat: ReturnType<typeof lstatSync>;
    try {
      stat = lstatSync(current);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT' || (error as NodeJS.ErrnoException).code === 'ENOTDIR')
        return { kind: 'missing', path: normal, at: current };
      throw error;
    }
    if (stat.isSymbolicLink()) return { kind: 'symlink', path: normal, at: current };
    if (current !== normal && !stat.isDirectory()) return { kind: 'missing', path: normal, at: current };
    if (current === normal && !stat.isDirectory()) return { kind: 'not-directory', path: normal };
  }
  return { kind: 'directory', path: normal || sep };
}

/** True when `inner` is `outer` or lies below it (both absolute and normalised). */
export function isWithin(inner: string, outer: string): boolean {
  if (outer === sep) return true;
  return inner === outer || inner.startsWith(outer + sep);
}

/** True when either path is the other or lies below it. */
export function overlaps(a: string, b: string): boolean {
  return isWithin(a, b) || isWithin(b, a);
}

/** Number of components of an absolute path (`/` is 0). */
export function depth(path: string): number {
  return path.split(sep).filter(Boolean).length;
}

/** True for a non-empty absolute path string. */
export function isAbsolutePath(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && isAbsolute(value) && !value.includes('\0');
}
