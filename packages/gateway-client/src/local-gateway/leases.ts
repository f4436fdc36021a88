import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { currentProcess, isProcessAlive, type ProcessIdentity } from './process-identity.js';
import { readJsonFile, removeFile, writePrivateFileAtomic } from './state-dir.js';

/** One lease holder, as recorded in `leases/<pid>-<random>.json`. */
export interface LeaseRecord extends ProcessIdentity {
  acquiredAt: string;
  lingerMs: number;
}

/** Records a lease held by this process; returns the file to remove on release. */
export function addLease(dir: string, lingerMs: number): string {
  const me = currentProcess();
  const file = join(dir, `${me.pid}-${randomBytes(6).toString('hex')}.json`);
  const record: LeaseRecord = { ...me, acquiredAt: new Date().toISOString(), lingerMs };
  writePrivateFileAtomic(file, JSON.stringify(record));
  return file;
}

/** The leases whose holder is still alive; the files of dead holders are removed. */
export function liveLeases(dir: string): LeaseRecord[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const live: LeaseRecord[] = [];
  for (const name of names) {
    if (!name.endsWith('.json')) continue;
    const file = join(dir, name);
    const record = readJsonFile(file) as Partial<LeaseRecord> | undefined;
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

/** The idle marker: since when the gateway has had no holder, and how long it may linger. */
export interface IdleMarker {
  /** Epoch milliseconds. */
  since: number;
  lingerMs: number;
}

/** Starts the linger clock (written by the last releaser). */
export function markIdle(path: string, lingerMs: number): void {
  writePrivateFileAtomic(path, JSON.stringify({ since: Date.now(), lingerMs } satisfies IdleMarker));
}

/** Stops the linger clock (a new lease was taken). */
export function clearIdle(path: string): void {
  removeFile(path);
}
