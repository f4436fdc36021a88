import type { Timer } from '@kernelwarden/core';
import type { KernelBuild } from './kernel-build.js';
import { type EndedReason, isAlive, type Lease, type SlotStatus, type SupervisedKernel } from './lease.js';

/** The supervisor's bookkeeping of one slot. Internal to the supervisor. */
export interface SlotRecord<K extends SupervisedKernel> {
  name: string;
  current?: Lease<K>;
  lastKey?: string;
  /** The last published generation; -1 before the first kernel. */
  generation: number;
  manualStop: boolean;
  endedReason?: EndedReason;
  builds: Set<KernelBuild<K>>;
  restarting?: { leaseId: string; promise: Promise<Lease<K> | undefined> };
  holds: number;
  lastActivityAt?: number;
  idleTimer?: Timer;
}

/** A slot that never held a kernel. */
export function emptySlotRecord<K extends SupervisedKernel>(name: string): SlotRecord<K> {
  return { name, generation: -1, manualStop: false, builds: new Set(), holds: 0 };
}

/** What `KernelSupervisor.status()` says about a slot (`undefined`: one it never saw). */
export function slotStatus(s: SlotRecord<SupervisedKernel> | undefined): SlotStatus {
  if (!s) {
    return {
      state: 'empty',
      alive: false,
      generation: 0,
      key: undefined,
      manualStop: false,
      building: false,
      restarting: false,
    };
  }
  const alive = s.current !== undefined && isAlive(s.current.kernel);
  let endedReason = s.endedReason;
  if (s.current && !alive && !endedReason) endedReason = 'worker_died';
  const state: SlotStatus['state'] = alive
    ? 'running'
    : s.manualStop
      ? 'stopped'
      : endedReason !== undefined
        ? 'ended'
        : 'empty';
  const status: SlotStatus = {
    state,
    alive,
    generation: Math.max(0, s.generation),
    key: s.current?.key ?? s.lastKey,
    manualStop: s.manualStop,
    building: [...s.builds].some((b) => !b.revoked),
    restarting: s.restarting !== undefined,
  };
  if (!alive && endedReason !== undefined) status.endedReason = endedReason;
  if (s.current) status.leaseId = s.current.id;
  if (s.lastActivityAt !== undefined) status.lastActivityAt = s.lastActivityAt;
  return status;
}
