import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { currentProcess, isProcessAlive, type ProcessIdentity } from '@kernelwarden/core/os';
import { watchDirectory } from './dir-watch.js';
import { readJsonFile, removeFile, writePrivateFileAtomic } from './state-dir.js';

/** One ticket holder, as recorded in `tickets/<pid>-<random>.json`. */
export interface TicketRecord extends ProcessIdentity {
  acquiredAt: string;
  lingerMs: number;
}

/** Records a ticket held by this process; returns the file to remove on release. */
export function addTicket(dir: string, lingerMs: number): string {
  const me = currentProcess();
  const file = join(dir, `${me.pid}-${randomBytes(6).toString('hex')}.json`);
  const record: TicketRecord = { ...me, acquiredAt: new Date().toISOString(), lingerMs };
  writePrivateFileAtomic(file, JSON.stringify(record));
  return file;
}

/** The tickets whose holder is still alive; the files of dead holders are removed. */
export function liveTickets(dir: string): TicketRecord[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const live: TicketRecord[] = [];
  for (const name of names) {
    if (!name.endsWith('.json')) continue;
    const file = join(dir, name);
    const record = readJsonFile(file) as Partial<TicketRecord> | undefined;
    if (record && typeof record.pid === 'number' && isProcessAlive(record as ProcessIdentity)) {
      live.push({
        pid: record.pid,
        startTime: record.startTime,
        acquiredAt: String(record.acquiredAt),
        lingerMs: typeof record.lingerMs === 'number' ? record.lingerMs : 0,
      });
    } else {
      removeFile(file);
    }
  }
  return live;
}

/**
 * The linger promise: the server stays up, with no holder, until `until` (epoch ms) — the latest end of every
 * linger a release asked for, so a short linger never cuts a longer one promised earlier.
 */
export interface IdleMarker {
  until: number;
}

function readMarker(path: string): IdleMarker | undefined {
  const value = readJsonFile(path) as Partial<IdleMarker> | undefined;
  return value && typeof value.until === 'number' ? { until: value.until } : undefined;
}

/** Extends the linger promise to at least `lingerMs` from now (written by a releaser that leaves no holder). */
export function markIdle(path: string, lingerMs: number): void {
  const until = Math.max(readMarker(path)?.until ?? 0, Date.now() + lingerMs);
  writePrivateFileAtomic(path, JSON.stringify({ until } satisfies IdleMarker));
}

/** The end of the linger promise (epoch ms), or undefined when no release made one. */
export function lingerUntil(path: string): number | undefined {
  return readMarker(path)?.until;
}

/** True while a release's linger promise has not run out. */
export function lingerPending(path: string): boolean {
  return (readMarker(path)?.until ?? 0) > Date.now();
}

/** Drops a linger promise that has expired (a new ticket was taken); a pending one is kept. */
export function clearExpiredIdle(path: string): void {
  const marker = readMarker(path);
  if (marker && marker.until <= Date.now()) removeFile(path);
}

/**
 * How long after a ticket is given back the watcher looks: 300 ms. The command that gave it back has ended, but the
 * server is still seeing its kernel out (the DELETE returns before the interpreter has exited); a replacement
 * started beside that left the next command's run 25 ms slower here (2 cores), one started after it did not.
 */
export const TICKET_SETTLE_MS = 300;

/**
 * Calls `onRelease` soon after a ticket is given back (a file of the tickets directory `dir` goes): the linger
 * watcher looks at the pool then (`TICKET_SETTLE_MS` later), not at its next look, up to a second later: a claimed
 * kernel's replacement has started at the claim already (`watchPoolClaims`), and a kernelspec the command asked to keep
 * pooled (`keep()`) gets its first kernel then. Not when a ticket is taken. Releases within `TICKET_SETTLE_MS` make one call. A
 * directory that cannot be watched is left to the looks. Returns the means to stop watching.
 */
export function watchTicketReleases(dir: string, onRelease: () => void): { close(): void } {
  return watchDirectory(dir, {
    // A ticket taken (its file appears, through a temporary file renamed into place) is no reason to look: by the
    // time of the look the command has claimed its kernel, and the replacement would start beside its cell.
    relevant: (file) => file === undefined || !(file.endsWith('.tmp') || existsSync(join(dir, file))),
    delayMs: TICKET_SETTLE_MS,
    onChange: onRelease,
  });
}
