import { linkSync, statSync } from 'node:fs';
import { sleep } from '@kernelwarden/core';
import { currentProcess, isProcessAlive, type ProcessIdentity } from '@kernelwarden/core/os';
import { readTextFile, removeFile, writePrivateTempFile } from './state-dir.js';

/** A lock file whose content could not be parsed is stale once it is older than this. */
const UNREADABLE_LOCK_STALE_MS = 10_000;
/** A takeover marker left by a process that died mid-takeover is stale once it is older than this. */
const TAKEOVER_STALE_MS = 10_000;

/** Who holds a lock, as written in the lock file. */
export interface LockOwner extends ProcessIdentity {
  acquiredAt: string;
}

/** A held lock; `release()` removes the file if it is still ours. */
export interface HeldLock extends Disposable {
  readonly path: string;
  release(): void;
}

/** Options of `acquireLock`. */
export interface AcquireLockOptions {
  /** Aborts the wait; the call rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
  /** Milliseconds between attempts while another live process holds the lock. @defaultValue 25 */
  pollMs?: number;
  /** Told once per distinct owner we wait for. */
  onWait?: (owner: ProcessIdentity) => void;
  /** Told when a dead owner's lock is taken over. */
  onTakeover?: (previous: ProcessIdentity | undefined) => void;
}

function parseOwner(text: string | undefined): LockOwner | undefined {
  if (text === undefined) return undefined;
  try {
    const value = JSON.parse(text) as Partial<LockOwner>;
    if (typeof value.pid !== 'number') return undefined;
    return {
      pid: value.pid,
      startTime: typeof value.startTime === 'string' ? value.startTime : undefined,
      acquiredAt: String(value.acquiredAt),
    };
  } catch {
    return undefined;
  }
}

function ageMs(path: string): number | undefined {
  try {
    return Date.now() - statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

type Attempt = { held: true } | { held: false; retryNow: boolean; owner: LockOwner | undefined };

/**
 * One attempt. The lock file is created with its content in one step (`link()` of a written temporary file fails
 * with EEXIST when the lock exists), so a lock file is never seen half-written.
 */
function tryLock(path: string, content: string, opts: AcquireLockOptions): Attempt {
  const tmp = writePrivateTempFile(path, content);
  try {
    linkSync(tmp, path);
    return { held: true };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    removeFile(tmp);
  }
  const seen = readTextFile(path);
  if (seen === undefined) return { held: false, retryNow: true, owner: undefined }; // released meanwhile
  const owner = parseOwner(seen);
  const stale = owner ? !isProcessAlive(owner) : (ageMs(path) ?? 0) > UNREADABLE_LOCK_STALE_MS;
  if (stale && takeOver(path, seen)) {
    opts.onTakeover?.(owner);
    return { held: false, retryNow: true, owner: undefined };
  }
  return { held: false, retryNow: false, owner: stale ? undefined : owner };
}

/**
 * Removes a stale lock without racing another process that is doing the same: only the holder of the exclusive
 * `<lock>.takeover` marker may remove the lock, and only if it still holds the content judged stale (so a fresh
 * lock taken by a faster process is never removed).
 */
function takeOver(path: string, staleContent: string): boolean {
  const marker = `${path}.takeover`;
  const tmp = writePrivateTempFile(marker, JSON.stringify(currentProcess()));
  try {
    linkSync(tmp, marker);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    if ((ageMs(marker) ?? 0) > TAKEOVER_STALE_MS) removeFile(marker);
    return false;
  } finally {
    removeFile(tmp);
  }
  try {
    if (readTextFile(path) !== staleContent) return false;
    removeFile(path);
    return true;
  } finally {
    removeFile(marker);
  }
}

function lockContent(): string {
  return JSON.stringify({ ...currentProcess(), acquiredAt: new Date().toISOString() } satisfies LockOwner);
}

function heldLock(path: string, content: string): HeldLock {
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    if (readTextFile(path) === content) removeFile(path);
  };
  return { path, release, [Symbol.dispose]: release };
}

/**
 * Takes the exclusive lock at `path`, waiting while a live process holds it and taking over the lock of a dead
 * one (pid gone, or reused by a process with another start time).
 */
export async function acquireLock(path: string, opts: AcquireLockOptions = {}): Promise<HeldLock> {
  const content = lockContent();
  let lastOwner: string | undefined;
  for (;;) {
    opts.signal?.throwIfAborted();
    const attempt = tryLock(path, content, opts);
    if (attempt.held) return heldLock(path, content);
    if (attempt.retryNow) continue;
    if (attempt.owner) {
      const key = `${attempt.owner.pid}:${attempt.owner.startTime}`;
      if (key !== lastOwner) opts.onWait?.(attempt.owner);
      lastOwner = key;
    }
    await sleep(opts.pollMs ?? 25, { signal: opts.signal });
  }
}

/**
 * Takes the lock at `path` if no live process holds it — a dead owner's lock is taken over — without waiting;
 * undefined while a live process holds it. For a loop that has other things to do (the linger watcher).
 */
export function tryAcquireLock(path: string): HeldLock | undefined {
  const content = lockContent();
  // A lock released or taken over meanwhile is tried again at once, a few times (another process may race us).
  for (let round = 0; round < 3; round++) {
    const attempt = tryLock(path, content, {});
    if (attempt.held) return heldLock(path, content);
    if (!attempt.retryNow) return undefined;
  }
  return undefined;
}

/** The current owner of the lock at `path`, if any (for status displays). */
export function lockOwner(path: string): LockOwner | undefined {
  return parseOwner(readTextFile(path));
}
