import { readdirSync, readFileSync } from 'node:fs';
import { KERNEL_MARKER_ENV } from './kernel-launch.js';

/**
 * Pids of the processes (other than this one) whose environment holds an entry starting with `prefix`
 * (`KERNELWARDEN_KERNEL=<instance>:` for every kernel of a server run, `…:<kernel id>` with `exact` for one kernel).
 * Only this user's processes can be read; others are skipped.
 */
export function processesCarrying(prefix: string, exact = false): number[] {
  const needle = Buffer.from(`\0${prefix}${exact ? '\0' : ''}`);
  return otherProcesses().filter((pid) => {
    try {
      const environ = readFileSync(`/proc/${pid}/environ`);
      return Buffer.concat([Buffer.from([0]), environ, Buffer.from([0])]).includes(needle);
    } catch {
      return false; // exited meanwhile, or not ours to read
    }
  });
}

/** Every pid in `/proc` but this process's; empty where there is no `/proc`. */
export function otherProcesses(): number[] {
  try {
    return readdirSync('/proc')
      .filter((entry) => /^\d+$/.test(entry) && Number(entry) !== process.pid)
      .map(Number);
  } catch {
    return [];
  }
}

/** The marker entry every process of kernel `kernelId` of server run `instance` carries. */
export function kernelMarker(instance: string, kernelId: string): string {
  return `${KERNEL_MARKER_ENV}=${instance}:${kernelId}`;
}

/**
 * Kills every process of one kernel at once — SIGKILL to each process carrying its marker, the kernel, its
 * children and whatever left its process group — until none is left (a process forking meanwhile is caught by the next
 * round). Says whether any was found. Used for an immediate kill: no shutdown request, no grace.
 */
export function killKernelProcesses(instance: string, kernelId: string): boolean {
  let found = false;
  for (let round = 0; round < 10; round++) {
    const pids = processesCarrying(kernelMarker(instance, kernelId), true);
    if (pids.length === 0) break;
    found = true;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
  }
  return found;
}
