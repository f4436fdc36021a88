import { availableParallelism, totalmem } from 'node:os';

/**
 * Memory set aside per kernel when `maxKernels` is derived from the machine: 160 MiB (an idle IPython kernel's
 * process is ~60-80 MB resident, its server-side state a few MB; the rest is headroom for the cells' own data).
 */
export const KERNEL_MEMORY_BUDGET_BYTES = 160 * 1024 * 1024;
/** The share of the machine's memory `maxKernels`' default hands to kernels: three quarters. */
const MEMORY_SHARE = 0.75;
/** The longest a create waits in the embedded server's start queue when it does not say: 120 s. */
export const DEFAULT_START_QUEUE_TIMEOUT_MS = 120_000;

/** How many kernels the embedded server starts at once by default: one per core (`os.availableParallelism()`). */
export function defaultMaxConcurrentStarts(cores = availableParallelism()): number {
  return Math.max(1, Math.floor(cores));
}

/**
 * How many kernels the embedded server runs at once by default: three quarters of the machine's memory
 * (`os.totalmem()`) at `KERNEL_MEMORY_BUDGET_BYTES` each, at least 4 — e.g. 115 on 24 GB, 23 on 5 GB.
 */
export function defaultMaxKernels(memoryBytes = totalmem()): number {
  return Math.max(4, Math.floor((memoryBytes * MEMORY_SHARE) / KERNEL_MEMORY_BUDGET_BYTES));
}

/** The start capacity of one embedded server run. */
export interface StartCapacitySettings {
  /** Kernels started at once; the others wait in a first-come, first-served queue. */
  maxConcurrentStarts: number;
  /** Kernels running at once (pooled ones included); a create past it waits for one to go, then answers 503. */
  maxKernels: number;
  /** The longest a create waits in the queue (a create's own `kernelwarden_wait_ms` may shorten it). */
  startQueueTimeoutMs: number;
}

/**
 * The longest a start slot stays taken by a kernel that has not answered yet: 60 s.
 *
 * The start capacity is done by the `kernelwarden_gateway` Python package shipped with this one
 * (`python/kernelwarden_gateway/capacity.py`): it replaces jupyter-server's `POST /api/kernels` and wraps its
 * `DELETE /api/kernels/{id}` (both still authenticated and authorized as jupyter-server's own):
 *
 * - **A start queue.** At most `maxConcurrentStarts` kernels start at once: a start takes a slot from its launch
 *   until the kernel answers a `kernel_info_request` (or `READY_WAIT_MS`), first come, first served. The warm pool's
 *   refills queue like any create.
 * - **A kernel limit.** Past `maxKernels` kernels (running plus starting), a create waits for one to go.
 * - **Bounded waits, with reasons.** A create waits at most `startQueueTimeoutMs`, or the `kernelwarden_wait_ms`
 *   of its body when shorter; then it is answered HTTP 503 `{ reason: 'at-capacity', max_kernels }` or
 *   `{ reason: 'busy', waited_ms }`, which GatewayClient raises as `GatewayCapacityError` / `GatewayBusyError`.
 * - **The wait, said.** A created kernel's model carries `kernelwarden_queued_ms`.
 * - **The id a create asks for.** `kernel_id` in the body (a UUID, not in use) becomes the kernel's id; a `DELETE`
 *   of that id while the create waits or starts withdraws it (answered 204; the create is answered 410).
 * - **No kernel for a requester who left.**
 */
export const READY_WAIT_MS = 60_000;
