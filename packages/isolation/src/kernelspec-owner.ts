import { InvalidOptionsError } from '@kernelwarden/core';
import { bootId, hasExited, pidNamespace, processStat } from '@kernelwarden/core/os';

/**
 * The process that installed an isolated kernelspec: its pid, its start time (`processStartTime`, so a reused pid is
 * not taken for it), the boot it ran in, and its PID namespace (a pid means nothing in another one).
 */
export interface SpecOwner {
  pid: number;
  startTime: string;
  bootId: string;
  pidNamespace: string;
}

/**
 * This process (or process `pid`, which must be running), as an owner. Throws `InvalidOptionsError` (path
 * `ownerPid`) for a pid that runs no process.
 */
export function currentOwner(pid: number = process.pid): SpecOwner {
  const stat = processStat(pid);
  if (pid !== process.pid && (typeof stat !== 'object' || hasExited(stat))) {
    throw new InvalidOptionsError([{ path: 'ownerPid', message: 'must be the pid of a running process' }], {
      subject: 'isolated kernelspec',
    });
  }
  return {
    pid,
    startTime: typeof stat === 'object' ? stat.startTime : '',
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
 * running, not a zombie), `unknown` when it cannot (another PID namespace, or no process table to read).
 */
export function ownerState(owner: SpecOwner): 'alive' | 'gone' | 'unknown' {
  const boot = bootId();
  if (!boot || !owner.bootId) return 'unknown';
  if (boot !== owner.bootId) return 'gone';
  const ns = pidNamespace();
  if (!ns || !owner.pidNamespace || ns !== owner.pidNamespace) return 'unknown';
  const stat = processStat(owner.pid);
  if (stat === 'unsupported') return 'unknown';
  if (stat === 'gone' || hasExited(stat) || stat.startTime !== owner.startTime) return 'gone';
  return 'alive';
}
