import type { ProgressUpdate } from './progress.js';

/** What a tool call brings besides its input: the caller's abort signal and, when wanted, a progress sink. */
export interface KernelToolCall {
  /** Aborting it interrupts the cell (and lets the watchdog kill and restart a kernel that ignores that). */
  signal?: AbortSignal | undefined;
  /** Receives progress while the cell runs; absent = no progress is computed. */
  onProgress?: ((update: ProgressUpdate) => void) | undefined;
}
