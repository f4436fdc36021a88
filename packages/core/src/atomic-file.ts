import { closeSync, openSync, renameSync, unlinkSync, writeSync } from 'node:fs';

/** Options of `writeFileAtomic()`. */
export interface WriteFileAtomicOptions {
  /** The new file's permission bits (before the umask): `0o600` for a file only its owner may read. */
  mode: number;
}

/**
 * Writes `data` (one piece, or several written in order) to `path` atomically: a reader sees the old content or the
 * new, never a part. The data goes to a temporary file beside `path` (`<path>.<pid>.<random>.tmp`, created
 * exclusively with `mode`), which is then renamed over `path`; when a step fails, the temporary file is removed and
 * the error thrown. Not fsynced: a crash of the machine may lose the new content, never mix old and new.
 */
export function writeFileAtomic(
  path: string,
  data: string | Uint8Array | readonly (string | Uint8Array)[],
  opts: WriteFileAtomicOptions,
): void {
  // Math.random, not node:crypto: the CLI's start writes through here, and the name only needs to be unlikely to clash
  // (the exclusive create refuses a clash rather than sharing a file).
  const tmp = `${path}.${process.pid}.${Math.random().toString(36).slice(2, 10)}.tmp`;
  const fd = openSync(tmp, 'wx', opts.mode);
  try {
    try {
      for (const piece of typeof data === 'string' || data instanceof Uint8Array ? [data] : data) {
        // writeSync may write less than asked (a full disk answers with an error instead).
        const bytes = typeof piece === 'string' ? Buffer.from(piece, 'utf8') : piece;
        for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done);
      }
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (error) {
    try {
      unlinkSync(tmp);
    } catch {
      // Already gone: nothing left behind.
    }
    throw error;
  }
}
