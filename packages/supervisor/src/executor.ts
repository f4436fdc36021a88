import type { ExecuteOptions, ExecuteResult, Output } from '@kernelwarden/core';
import { NoKernelError } from './errors.js';
import type { Lease, SupervisedKernel } from './lease.js';
import type { SlotSupervisor } from './slot-supervisor.js';

/**
 * One cell to run on a supervised slot. Executors take the kernel from `lease` when given, else from
 * `supervisor.lease(slot)`.
 *
 * `K` is the kernel type of the supervisor and lease; an executor takes `CellRunRequest` (any kernel), and a
 * request for a narrower kernel type is one too.
 */
export interface CellRunRequest<K extends SupervisedKernel = SupervisedKernel> {
  /** The supervisor holding the slot: the exact-lease operations act through it. */
  supervisor: SlotSupervisor<K>;
  /** The slot to run on (`'python'`, `'r'`). */
  slot: string;
  code: string;
  /** The exact lease to run on; executors act on this generation only. */
  lease?: Lease<K>;
  /** Carried to the kernel unchanged and back as `result.cellId`. */
  cellId?: string;
  /** A free label kept on events. */
  origin?: string;
  onOutput?: (output: Output) => void;
  onInput?: ExecuteOptions['onInput'];
  /** Aborts the cell: the kernel is interrupted and the result settles with `cancelled: true`. */
  signal?: AbortSignal;
  /**
   * Aborts, just before `signal`, when the cell is cancelled because the session stops or closes rather than because
   * the caller gave up. The session has then interrupted the kernel once already and shuts it down next, killing what
   * does not stop: an executor should settle at once and not interrupt, kill, restart or bootstrap of its own.
   */
  stopSignal?: AbortSignal;
  /** Re-runs the session's bootstrap on a lease, e.g. after the watchdog restarted the kernel. */
  bootstrap?(lease: Lease<K>): Promise<void>;
}

/**
 * Runs one cell on a supervised slot: the seam where the watchdog (`createWatchdog()`) plugs into `KernelSession`.
 *
 * Implement it to wrap execution with your own policy; `plainExecutor` is the default.
 */
export interface CellExecutor {
  /** Runs `req.code` on `req.lease` (else the slot's current lease) and resolves with its result. */
  run(req: CellRunRequest): Promise<ExecuteResult>;
}

/**
 * The executor without a timeout ladder: runs the cell on the lease's kernel and returns its result.
 *
 * `KernelSession` uses it unless given another `executor`. Rejects with `NoKernelError` when there is no lease or
 * the kernel cannot `execute`.
 */
export const plainExecutor: CellExecutor = {
  async run(req) {
    const lease = req.lease ?? req.supervisor.lease(req.slot);
    if (!lease) throw new NoKernelError(req.slot);
    const kernel = lease.kernel;
    if (typeof kernel.execute !== 'function') throw new NoKernelError(req.slot, 'kernel has no execute()');
    const opts: ExecuteOptions = {};
    if (req.cellId !== undefined) opts.cellId = req.cellId;
    if (req.origin !== undefined) opts.origin = req.origin;
    if (req.onOutput) opts.onOutput = req.onOutput;
    if (req.onInput) opts.onInput = req.onInput;
    if (req.signal) opts.signal = req.signal;
    return kernel.execute(req.code, opts);
  },
};
