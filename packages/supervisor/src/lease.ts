import type { KernelHandle } from '@kernelwarden/core';

/**
 * The part of `KernelHandle` the supervisor needs: identity, liveness, interrupt and shutdown; `kill`, `restart`
 * and `execute` are used when present.
 *
 * `GatewayKernel` and testkit's `RecordingKernel` fit it; so does any object of your own with these members.
 */
export type SupervisedKernel = Pick<KernelHandle, 'id' | 'isAlive' | 'interrupt' | 'shutdown'> &
  Partial<Pick<KernelHandle, 'kill' | 'restart' | 'execute'>>;

/**
 * Proof of which kernel a slot held, and in which generation, when the lease was taken.
 *
 * Pass it to the exact-lease operations (`interruptIfCurrent`, `killIfCurrent`, `restartIfCurrent`,
 * `shutdownIfCurrent`): they act only while the slot still holds this very kernel in this very generation, so a
 * late watchdog or a stale request never touches a newer kernel.
 */
export interface Lease<K extends SupervisedKernel = SupervisedKernel> {
  /** The slot's name (`'python'`, `'r'`, …). */
  readonly slot: string;
  /** The key the kernel was built for (the environment name in a session). */
  readonly key: string;
  /** The slot's generation: 0 for the first kernel, +1 on every replacement or restart; it never goes down. */
  readonly generation: number;
  /** Opaque and unique per lease; a restart of the same kernel gets a new one. */
  readonly id: string;
  /** The kernel itself. */
  readonly kernel: K;
}

/**
 * Why a slot lost its kernel: a string chosen by the caller (`stop(slot, { reason })`, `shutdownIfCurrent`) or one of
 * the supervisor's own: `'manual_stop'`, `'idle_ttl'`, `'worker_died'`, `'restart_failed'`, `'shutdown'`,
 * `'desynchronized'`.
 */
export type EndedReason = string;

/**
 * A slot's state at one moment; `status()` answers at once, whatever is being built or restarted.
 *
 * `state`: `'running'` when the current kernel is alive; `'stopped'` after a manual `stop()`; `'ended'` when the
 * kernel went away for another reason (idle expiry, death, shutdown — see `endedReason`); `'empty'` before the
 * first kernel.
 */
export interface SlotStatus {
  state: 'running' | 'stopped' | 'ended' | 'empty';
  /** The current kernel is alive. */
  alive: boolean;
  /** The last generation published (0 before the first one). */
  generation: number;
  /** The current (or last) kernel's key; `undefined` before the first kernel. */
  key: string | undefined;
  /** The slot was stopped by a manual `stop()` and not ensured since. */
  manualStop: boolean;
  /** Why the kernel went away, when it did. */
  endedReason?: EndedReason;
  /** The current lease's id, when the slot holds a kernel. */
  leaseId?: string;
  /** A kernel is being built for this slot right now. */
  building: boolean;
  /** The current kernel is being restarted right now. */
  restarting: boolean;
  /** Clock time of the slot's last activity (ensure, `hold()`, publish). */
  lastActivityAt?: number;
}

/** True when the kernel says it is alive; a throwing `isAlive()` counts as dead. */
export function isAlive(kernel: SupervisedKernel): boolean {
  try {
    return kernel.isAlive();
  } catch {
    return false;
  }
}
