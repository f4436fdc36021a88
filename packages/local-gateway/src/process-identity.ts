import { readFileSync } from 'node:fs';

/**
 * A process named by its pid and, where `/proc` exists, its start time (clock ticks since boot, field 22 of
 * `/proc/<pid>/stat`), so that a pid the kernel has handed to a new process is not mistaken for the old one.
 */
export interface ProcessIdentity {
  pid: number;
  /** Absent where `/proc` is not available; liveness then falls back to `kill(pid, 0)`. */
  startTime?: string | undefined;
}

interface ProcStat {
  state: string;
  startTime: string;
}

function readProcStat(pid: number): ProcStat | 'gone' | 'unsupported' {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      return process.platform === 'linux' ? 'gone' : 'unsupported';
    }
    return 'unsupported';
  }
  // The command name (field 2) may hold spaces and parentheses: the fields after it start past the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const state = fields[0];
  const startTime = fields[19];
  if (state === undefined || startTime === undefined) return 'unsupported';
  return { state, startTime };
}

/** The start time of process `pid`, or undefined when it is gone or `/proc` is unavailable. */
export function processStartTime(pid: number): string | undefined {
  const stat = readProcStat(pid);
  return typeof stat === 'object' ? stat.startTime : undefined;
}

/** This process's identity. */
export function currentProcess(): ProcessIdentity {
  return { pid: process.pid, startTime: processStartTime(process.pid) };
}

/** Start time recorded for a process that was already gone when we looked: it never matches a live one. */
const GONE = 'gone';

/**
 * The identity of a running process (its start time read at once, before the pid could be reused). A process
 * already gone gets an identity that no live process matches, so it can never be signalled by mistake.
 */
export function identityOf(pid: number): ProcessIdentity {
  const stat = readProcStat(pid);
  if (stat === 'gone' || pid <= 0) return { pid, startTime: GONE };
  return { pid, startTime: stat === 'unsupported' ? undefined : stat.startTime };
}

/**
 * True while the process `id` names is running: same pid, same start time, not a zombie.
 *
 * A recorded start time that differs from the current one means the pid was reused by another process: dead.
 */
export function isProcessAlive(id: ProcessIdentity): boolean {
  if (!Number.isInteger(id.pid) || id.pid <= 0) return false;
  const stat = readProcStat(id.pid);
  if (stat === 'gone') return false;
  if (stat === 'unsupported') {
    try {
      process.kill(id.pid, 0);
      return true;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'EPERM';
    }
  }
  if (stat.state === 'Z' || stat.state === 'X' || stat.state === 'x') return false;
  return id.startTime === undefined || id.startTime === stat.startTime;
}

/** Sends `signal` to process group `pgid` (a leader started with setsid); false when it no longer exists. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    try {
      process.kill(pgid, signal);
      return true;
    } catch {
      return false;
    }
  }
}

/** The real uid of process `pid` (from `/proc/<pid>/status`), or undefined when it cannot be read. */
export function processUid(pid: number): number | undefined {
  try {
    const match = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match?.[1] === undefined ? undefined : Number(match[1]);
  } catch {
    return undefined;
  }
}

/**
 * Whether process `pid` was started with `NAME=value` in its environment (`/proc/<pid>/environ`, readable for the
 * user's own processes only); undefined when it cannot be read.
 */
export function processEnvironHas(pid: number, entry: string): boolean | undefined {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(entry);
  } catch {
    return undefined;
  }
}
