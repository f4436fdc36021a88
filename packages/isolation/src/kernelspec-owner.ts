import { readFileSync, readlinkSync } from 'node:fs';
import { InvalidOptionsError } from '@kernelwarden/core';

/**
 * The process that installed an isolated kernelspec: its pid, its start time (field 22 of `/proc/<pid>/stat`, so a
 * reused pid is not taken for it), the boot it ran in, and its PID namespace (a pid means nothing in another one).
 */
export interface SpecOwner {
  pid: number;
  startTime: string;
  bootId: string;
  pidNamespace: string;
}

function readOr(read: () => string): string {
  try {
    return read().trim();
  } catch {
    return '';
  }
}

/** Start time and state of process `pid`, or undefined when it is gone. */
function procStat(pid: number): { state: string; startTime: string } | undefined {
  const text = readOr(() => readFileSync(`/proc/${pid}/stat`, 'utf8'));
  if (!text) return undefined;
  // The command name (field 2) may hold spaces and parentheses: the fields after it start past the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { state: fields[0] ?? '', startTime: fields[19] ?? '' };
}

function bootId(): string {
  return readOr(() => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8'));
}

function pidNamespace(): string {
  return readOr(() => readlinkSync('/proc/self/ns/pid'));
}

/**
 * This process (or process `pid`, which must be running), as an owner. Throws `InvalidOptionsError` (path
 * `ownerPid`) for a pid that runs no process.
 */
export function currentOwner(pid: number = process.pid): SpecOwner {
  const stat = procStat(pid);
  if (pid !== process.pid && (!Number.isInteger(pid) || pid <= 0 || !stat || stat.state === 'Z')) {
    throw new InvalidOptionsError([{ path: 'ownerPid', message: 'must be the pid of a running process' }], {
      subject: 'isolated kernelspec',
    });
  }
  return {
    pid,
    startTime: stat?.startTime ?? '',
    bootId: bootId(),
    pidNamespace: pidNamespace(),
  };
}

/** Reads an owner record back; undefined for anything malformed. */
export function parseOwner(value: unknown): SpecOwner | undefined {
  const v = value as Partial<SpecOwner> | null | undefined;
  if (!v || typeof v !== 'object') return undefined;
  if (!Number.isInteger(v.pid) || (v.pid as number) <= 0) return undefined;
  for (const key of ['startTime', 'bootId', 'pidNamespace'] as const) if (typeof v[key] !== 'string') return undefined;
  return { pid: v.pid as number, startTime: v.startTime!, bootId: v.bootId!, pidNamespace: v.pidNamespace! };
}

/**
 * `alive` or `gone` when this process can tell (same boot, same PID namespace: the pid with the same start time is
 * running, not a zombie), `unknown` when it cannot (another PID namespace, or `/proc` unreadable).
 */
export function ownerState(owner: SpecOwner): 'alive' | 'gone' | 'unknown' {
  const boot = bootId();
  if (!boot || !owner.bootId) return 'unknown';
  if (boot !== owner.bootId) return 'gone';
  const ns = pidNamespace();
  if (!ns || !owner.pidNamespace || ns !== owner.pidNamespace) return 'unknown';
  const stat = procStat(owner.pid);
  if (!stat) return 'gone';
  if (stat.state === 'Z' || stat.state === 'X' || stat.startTime !== owner.startTime) return 'gone';
  return 'alive';
}
