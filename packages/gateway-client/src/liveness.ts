import type { Clock, Timer } from '@kernelwarden/core';
import type { GatewayClient, KernelModel } from './gateway-client.js';

/** What REST says about a kernel: running, dead, gone from the gateway, or no answer. */
export type KernelProbe = 'alive' | 'dead' | 'gone' | 'unknown';

/** Asks `GET /api/kernels/{id}` whether the kernel still exists; an unanswered request is `'unknown'`. */
export async function probeKernel(client: GatewayClient, kernelId: string, timeoutMs: number): Promise<KernelProbe> {
  let model: KernelModel | undefined;
  try {
    model = await client.getKernel(kernelId, { timeoutMs });
  } catch {
    return 'unknown';
  }
  if (!model) return 'gone';
  return model.execution_state === 'dead' ? 'dead' : 'alive';
}

/** The socket the poll watches (the channel's). */
export interface LivenessSocket {
  /** Messages received so far. */
  readonly received: number;
  /** A dropped socket is being reopened (its own loop asks REST then). */
  readonly isReconnecting: boolean;
}

/** Options of `new LivenessPoll()`. */
export interface LivenessPollOptions {
  clock: Clock;
  /** The interval; `0` disables the poll. */
  everyMs: number;
  socket: LivenessSocket;
  /** True while cells are in flight: the poll only runs then. */
  busy(): boolean;
  /** True while a server restart is being recovered from (the recovery asks REST itself). */
  recovering(): boolean;
  /** Asks REST about the kernel and fails everything when it is gone; resolves true then. */
  check(): Promise<boolean>;
}

/**
 * While cells are in flight and the socket has received nothing for `everyMs`, asks REST whether the kernel still
 * exists (a kernel shut down or culled elsewhere never says so on the socket). Not while the socket is reconnecting
 * or a server restart is being recovered from: those ask REST themselves.
 */
export class LivenessPoll {
  readonly #opts: LivenessPollOptions;
  #timer: Timer | undefined;
  #seen = -1;

  constructor(opts: LivenessPollOptions) {
    this.#opts = opts;
  }

  /** True while its timer is armed. */
  get armed(): boolean {
    return this.#timer !== undefined;
  }

  /** Arms the next check unless one is armed or the poll is disabled (call when a cell is added). */
  schedule(): void {
    const { everyMs, clock, socket } = this.#opts;
    if (this.#timer || everyMs <= 0) return;
    this.#seen = socket.received;
    this.#timer = clock.setTimer(() => void this.#tick(), everyMs);
  }

  /** Cancels the next check. */
  stop(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  async #tick(): Promise<void> {
    this.#timer = undefined;
    const { busy, socket, recovering, check } = this.#opts;
    if (!busy()) return;
    const quiet = socket.received === this.#seen;
    if (quiet && !socket.isReconnecting && !recovering() && (await check())) return;
    if (busy()) this.schedule();
  }
}
