import { readdirSync, readFileSync } from 'node:fs';
import { processCmdline, processStat } from './stat.js';

/** Every pid in `/proc`, or undefined where there is no `/proc` to list. */
export function listProcesses(): number[] | undefined {
  try {
    return readdirSync('/proc')
      .filter((entry) => /^\d+$/.test(entry))
      .map(Number);
  } catch {
    return undefined;
  }
}

/** Every pid in `/proc` but this process's; empty where there is no `/proc`. */
export function otherProcesses(): number[] {
  return (listProcesses() ?? []).filter((pid) => pid !== process.pid);
}

/**
 * The descendants of process `pid` (its children, theirs, and so on; not `pid` itself), from the parent pid each
 * process's stat names. A process that left for a process group of its own is still a descendant while its parent lives; one
 * whose parent exited was handed to a reaper and is not. Empty where there is no `/proc`.
 */
export function descendantsOf(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const child of listProcesses() ?? []) {
    const stat = processStat(child);
    if (typeof stat !== 'object') continue; // exited meanwhile
    const siblings = children.get(stat.ppid);
    if (siblings) siblings.push(child);
    else children.set(stat.ppid, [child]);
  }
  const found: number[] = [];
  const queue = [pid];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    for (const child of children.get(next) ?? []) {
      if (found.includes(child) || child === pid) continue;
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

/**
 * An environment entry that marks processes: `NAME=value` carried by a process and inherited by everything it
 * starts. `value` matches the value exactly; `valuePrefix` / `valueSuffix` match its start / end; with none of them,
 * any value of `name` matches.
 */
export interface EnvMarker {
  name: string;
  value?: string | undefined;
  valuePrefix?: string | undefined;
  valueSuffix?: string | undefined;
}

function matchesMarker(entry: string, marker: EnvMarker): boolean {
  if (!entry.startsWith(`${marker.name}=`)) return false;
  const value = entry.slice(marker.name.length + 1);
  if (marker.value !== undefined && value !== marker.value) return false;
  if (marker.valuePrefix !== undefined && !value.startsWith(marker.valuePrefix)) return false;
  if (marker.valueSuffix !== undefined && !value.endsWith(marker.valueSuffix)) return false;
  return true;
}

/**
 * Pids of the processes (other than this one) whose environment carries `marker`. Only this user's processes can be
 * read; others are skipped. Empty where there is no `/proc`.
 */
export function processesCarrying(marker: EnvMarker): number[] {
  const needle = Buffer.from(`\0${marker.name}=`);
  return otherProcesses().filter((pid) => {
    let environ: Buffer;
    try {
      environ = readFileSync(`/proc/${pid}/environ`);
    } catch {
      return false; // exited meanwhile, or not ours to read
    }
    const framed = Buffer.concat([Buffer.from([0]), environ]);
    if (!framed.includes(needle)) return false;
    return framed
      .toString('utf8')
      .split('\0')
      .some((entry) => matchesMarker(entry, marker));
  });
}

/**
 * Kills every process carrying `marker` at once with SIGKILL, looking again until none is left (a process forking
 * meanwhile is caught by the next round), for `rounds` rounds (10) at most. Returns the pids signalled. With another
 * `signal` (SIGTERM, say) there is one round: those processes are asked to exit, and may take their time.
 */
export function killProcessesCarrying(
  marker: EnvMarker,
  opts: { signal?: NodeJS.Signals; rounds?: number } = {},
): number[] {
  const signalled = new Set<number>();
  for (let round = 0; round < (opts.rounds ?? 10); round++) {
    const pids = processesCarrying(marker);
    if (pids.length === 0) break;
    for (const pid of pids) {
      try {
        process.kill(pid, opts.signal ?? 'SIGKILL');
        signalled.add(pid);
      } catch {
        // gone already
      }
    }
    if (opts.signal !== undefined && opts.signal !== 'SIGKILL') break; // a catchable signal: once is the request
  }
  return [...signalled];
}

/**
 * Pids of the processes (other than this one) whose command line contains `text`, or undefined where there is no
 * `/proc` to tell. A zombie's command line reads empty: it never matches.
 */
export function processesMentioning(text: string): number[] | undefined {
  const pids = listProcesses();
  if (!pids) return undefined;
  return pids.filter((pid) => pid !== process.pid && (processCmdline(pid)?.join('\0').includes(text) ?? false));
}
