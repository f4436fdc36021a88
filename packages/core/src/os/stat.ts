import { existsSync, readFileSync, readlinkSync } from 'node:fs';

/** What `/proc/<pid>/stat` says about a process, of the fields kernelwarden uses. */
export interface ProcStat {
  pid: number;
  /** The command name (field 2), as the kernel keeps it: up to 15 bytes, any of them `)`, a space or a newline. */
  comm: string;
  /** One letter (field 3): `R`, `S`, `D`, `Z` (zombie), `X` (dead)… */
  state: string;
  /** The parent's pid (field 4). */
  ppid: number;
  /** Clock ticks from boot to the process's start (field 22), as the decimal text the kernel wrote. */
  startTime: string;
}

const DECIMAL = /^\d+$/;

/**
 * Parses the text of `/proc/<pid>/stat`, or undefined when it is not one. The command name (field 2) is whatever the
 * process named itself, parentheses, spaces and newlines included: it is taken from after the first `(` to the last
 * `)`, since every field after it is a number or a state letter and none holds a `)`.
 */
export function parseProcStat(text: string): ProcStat | undefined {
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  if (open < 1 || close < open) return undefined;
  const pid = text.slice(0, open).trim();
  const fields = text
    .slice(close + 1)
    .trim()
    .split(' ');
  const [state, ppid] = fields;
  const startTime = fields[19];
  if (!DECIMAL.test(pid) || state === undefined || !/^[A-Za-z]$/.test(state)) return undefined;
  if (ppid === undefined || !DECIMAL.test(ppid) || startTime === undefined || !DECIMAL.test(startTime))
    return undefined;
  return { pid: Number(pid), comm: text.slice(open + 1, close), state, ppid: Number(ppid), startTime };
}

/**
 * `/proc/<pid>/stat` of process `pid`: `'gone'` when no such process runs (on Linux), `'unsupported'` when this
 * system has no `/proc` to tell (or the file cannot be read or parsed).
 */
export function processStat(pid: number): ProcStat | 'gone' | 'unsupported' {
  if (!Number.isInteger(pid) || pid <= 0) return 'gone';
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return (code === 'ENOENT' || code === 'ESRCH') && process.platform === 'linux' ? 'gone' : 'unsupported';
  }
  return parseProcStat(text) ?? 'unsupported';
}

/** The start time of process `pid` (field 22 of its stat), or undefined when it is gone or `/proc` is unavailable. */
export function processStartTime(pid: number): string | undefined {
  const stat = processStat(pid);
  return typeof stat === 'object' ? stat.startTime : undefined;
}

/** Whether a stat's state is a process that has exited (a zombie, or dead). */
export function hasExited(stat: ProcStat): boolean {
  return stat.state === 'Z' || stat.state === 'X' || stat.state === 'x';
}

/**
 * A process named by its pid and, where `/proc` exists, its start time (field 22 of its stat), so that a pid the
 * kernel has handed to a new process is not mistaken for the old one.
 */
export interface ProcessIdentity {
  pid: number;
  /** Absent where `/proc` is not available; liveness then falls back to `kill(pid, 0)`. */
  startTime?: string | undefined;
}

/** Start time recorded for a process that was already gone when it was looked at: it never matches a live one. */
const GONE = 'gone';

/** This process's identity. */
export function currentProcess(): ProcessIdentity {
  return { pid: process.pid, startTime: processStartTime(process.pid) };
}

/**
 * The identity of a running process (its start time read at once, before the pid could be reused). A process
 * already gone gets an identity no live process matches, so it can never be signalled by mistake.
 */
export function identityOf(pid: number): ProcessIdentity {
  const stat = processStat(pid);
  if (stat === 'gone') return { pid, startTime: GONE };
  return { pid, startTime: stat === 'unsupported' ? undefined : stat.startTime };
}

/**
 * True while the process `id` names is running: same pid, same start time, not a zombie. A recorded start time that
 * differs from the current one means the pid went to another process: dead. Without `/proc`, `kill(pid, 0)` decides.
 */
export function isProcessAlive(id: ProcessIdentity): boolean {
  if (!Number.isInteger(id.pid) || id.pid <= 0) return false;
  const stat = processStat(id.pid);
  if (stat === 'gone') return false;
  if (stat === 'unsupported') {
    try {
      process.kill(id.pid, 0);
      return true;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'EPERM';
    }
  }
  if (hasExited(stat)) return false;
  return id.startTime === undefined || id.startTime === stat.startTime;
}

/** Sends `signal` to process group `pgid` (a leader started with setsid), else to the process; false when neither exists. */
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

/** The real uid of process `pid` (the `Uid:` line of its status), or undefined when it cannot be read. */
export function processUid(pid: number): number | undefined {
  try {
    const match = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match?.[1] === undefined ? undefined : Number(match[1]);
  } catch {
    return undefined;
  }
}

/** The arguments process `pid` runs with (its `cmdline`), or undefined when it cannot be read; empty for a zombie. */
export function processCmdline(pid: number): string[] | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (text === '') return [];
    return (text.endsWith('\0') ? text.slice(0, -1) : text).split('\0');
  } catch {
    return undefined;
  }
}

/**
 * The environment process `pid` was started with (`NAME=value` entries), or undefined when it cannot be read: only
 * the user's own processes can be.
 */
export function processEnviron(pid: number): string[] | undefined {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .filter((entry) => entry !== '');
  } catch {
    return undefined;
  }
}

/** Whether process `pid` was started with `entry` (`NAME=value`) in its environment; undefined when it cannot be read. */
export function processEnvironHas(pid: number, entry: string): boolean | undefined {
  return processEnviron(pid)?.includes(entry);
}

/** This boot's random id (`/proc/sys/kernel/random/boot_id`), or `''` when it cannot be read. */
export function bootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return '';
  }
}

/** The PID namespace this process runs in (`pid:[N]`), or `''` when it cannot be read: a pid means nothing in another. */
export function pidNamespace(): string {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return '';
  }
}

/**
 * The directory this process's open descriptors can be named through (`/proc/self/fd`), or undefined where there is
 * none: `<dir>/<fd>/<name>` opens `name` in the directory descriptor `fd` refers to.
 */
export function descriptorDirectory(): string | undefined {
  return existsSync('/proc/self/fd') ? '/proc/self/fd' : undefined;
}
