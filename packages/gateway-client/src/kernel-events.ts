import type { ProtocolError } from './errors.js';

/** The states a `GatewayKernel` reports through `status` and `status` events. */
export type KernelStatus = 'starting' | 'idle' | 'busy' | 'restarting' | 'dead' | 'closed';

/** Every event a `GatewayKernel` emits, by name, with its payload. No payload ever carries a token. */
export interface GatewayKernelEventMap {
  /** The kernel's status changed. */
  status: { status: KernelStatus; previous: KernelStatus };
  /**
   * A cell's `execute_request` was sent: `msgId` is what `collect()` (or `collectCell()`) reads the cell back by from
   * the kernel's journal, from any process.
   */
  'execute-request': { cellId: string; msgId: string; origin?: string };
  /**
   * Messages numbered `from` to `to` (`[generation, seq]`, inclusive) fell out of the kernel's journal before a read
   * after a dropped socket reached them: the cells in flight are marked `outputDropped` (and `output-dropped`).
   */
  'journal-lost': { from: [number, number]; to: [number, number] };
  /** The server dropped output of a cell (its iopub rate limit, or a message lost around a socket drop); the result has `outputDropped`. */
  'output-dropped': { cellId: string; origin?: string };
  /**
   * A message broke the protocol (a frame that does not decode, a part of the wrong shape, a frame over
   * `maxFrameBytes`); it was dropped and the kernel keeps working. `cellId` names the cell it answered, when its
   * parent names one of this handle's cells in flight: that cell settles with status `'error'`.
   */
  'protocol-error': { error: ProtocolError; cellId?: string };
  /** The channels socket dropped; attempt `attempt` to reopen it starts after `delayMs`. */
  reconnecting: { attempt: number; delayMs: number };
  /** The channels socket is open again (same session id: the server replays what it buffered). */
  reconnected: Record<string, never>;
  /** The channels socket could not be reopened; pending executions failed with `KernelDiedError`. */
  'connection-lost': { error: Error };
}

/** A listener of event `K`. */
export type GatewayKernelListener<K extends keyof GatewayKernelEventMap> = (event: GatewayKernelEventMap[K]) => void;
