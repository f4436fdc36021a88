import { abortScope, type Clock } from '@kernelwarden/core';
import { KernelDiedError } from './errors.js';
import type { GatewayClient } from './gateway-client.js';
import { formatBytes } from './limit-deaths.js';
import type { PendingCells } from './pending-cells.js';
import type { SendGate } from './send-gate.js';

/** How a kernel the server restarted on its own is reconnected to. */
export interface RecoveryPolicy {
  /** One deadline over every attempt; past it the kernel counts as dead (unless REST says it is gone). */
  timeoutMs: number;
  /** The bound of the first attempt's reopen and handshake; each further attempt gets as much more. */
  attemptTimeoutMs: number;
  /** The longest bound of one attempt. */
  maxAttemptTimeoutMs: number;
}

/** Options of `new RestartRecovery()`. */
export interface RestartRecoveryOptions {
  clock: Clock;
  client: GatewayClient;
  /** The kernel's current id (a kill can replace the kernel by a fresh one under another id). */
  kernelId(): string;
  /** The bound on `POST …/restart` (the server stops the process, killing it when it ignores the request). */
  restartTimeoutMs: number;
  recovery: RecoveryPolicy;
  /** Where requests wait while a restart runs. */
  gate: SendGate;
  /** The cells in flight: a server restart loses them. */
  cells: Pick<PendingCells, 'failAll'>;
  /** Reopens the channels socket and runs the `kernel_info` handshake on it. */
  reconnect(signal: AbortSignal | undefined): Promise<void>;
  /** False once the kernel was shut down or died for good. */
  alive(): boolean;
  /** Asks REST about the kernel and fails everything when it is gone; resolves true then. */
  checkGone(): Promise<boolean>;
  /** The kernel did not come back after the server restarted it. */
  giveUp(cause: unknown): void;
  /** The kernel is usable again. */
  ready(): void;
  /** When the kernel was killed for memory (its limits' counters say so): its memory limit, for the message. */
  oomDeath?(): { memoryLimitBytes: number | undefined } | undefined;
}

/**
 * The two restarts a kernel goes through on the same handle, and the requests held while they run (`SendGate`):
 *
 * - ours (`restart()`, `kill()`): `POST …/restart`, then the socket is reopened (the new process may listen on new
 *   ports) and the handshake redone;
 * - the server's (its auto-restarter, after a crash or `kill -9`): the socket is reopened and the handshake redone,
 *   each attempt bounded, since a socket opened while the server still restarts the kernel may never see a reply.
 *
 * Requests wait until the new socket's iopub is known to be subscribed: a cell sent earlier could run before iopub
 * is connected, lose its `status: idle` and never complete.
 */
export class RestartRecovery {
  readonly #opts: RestartRecoveryOptions;
  #own = false;
  #recovering: Promise<void> | undefined;

  constructor(opts: RestartRecoveryOptions) {
    this.#opts = opts;
  }

  /** True while one of our restarts runs: a `restarting` status on iopub is then ours, not a crash. */
  get restarting(): boolean {
    return this.#own;
  }

  /** True while a server restart is being recovered from. */
  get recovering(): boolean {
    return this.#recovering !== undefined;
  }

  /**
   * Our restart: `POST …/restart`, reopen, handshake; requests wait meanwhile. With `swap`, the kernel is replaced
   * instead (`swap` kills it and points the channels at a fresh one, or restarts it; it resolves true when the kernel
   * changed), and `prepare` runs on the fresh kernel after the handshake, before any waiting request is sent.
   */
  async restart(
    signal: AbortSignal | undefined,
    replacement?: {
      swap(signal: AbortSignal | undefined): Promise<boolean>;
      prepare(signal: AbortSignal | undefined): Promise<void>;
    },
  ): Promise<void> {
    const { client, restartTimeoutMs, gate, reconnect, alive, ready } = this.#opts;
    this.#own = true;
    const work = (async () => {
      let swapped = false;
      if (replacement) swapped = await replacement.swap(signal);
      else await client.restartKernel(this.#opts.kernelId(), { signal, timeoutMs: restartTimeoutMs });
      await reconnect(signal);
      if (swapped) await replacement?.prepare(signal);
    })();
    gate.hold(work);
    try {
      await work;
      if (alive()) ready();
    } finally {
      this.#own = false;
    }
  }

  /**
   * The server says it is restarting the kernel. Unless that is our own restart, the kernel crashed (or was killed
   * outside): the cells in flight reject with `KernelDiedError` (`reason: 'restarted'`) and the socket is reconnected
   * in the background.
   */
  serverRestarting(): void {
    if (this.#own) return;
    const { client, cells } = this.#opts;
    const kernelId = this.#opts.kernelId();
    const oom = this.#opts.oomDeath?.();
    cells.failAll(
      oom
        ? new KernelDiedError(
            `Kernel ${kernelId} at ${client.baseUrl} was killed for using more than its memory limit${oom.memoryLimitBytes === undefined ? '' : ` (${formatBytes(oom.memoryLimitBytes)})`}; the server restarted it, so its variables are gone and the cell's remaining output is lost`,
            { reason: 'oom', kernelId },
          )
        : new KernelDiedError(
            `Kernel ${kernelId} at ${client.baseUrl} died while the cell ran; the server restarted it, so its variables are gone and the cell's remaining output is lost`,
            { reason: 'restarted', kernelId },
          ),
    );
    this.recover();
  }

  /** Reconnects in the background after a server restart (once, however often it is told). */
  recover(): void {
    if (this.#recovering) return;
    const recovering = this.#run().finally(() => {
      this.#recovering = undefined;
    });
    this.#recovering = recovering;
    this.#opts.gate.hold(recovering);
  }

  async #run(): Promise<void> {
    const { clock, recovery, reconnect, alive, checkGone, giveUp, ready } = this.#opts;
    const scope = abortScope({ timeoutMs: recovery.timeoutMs, clock });
    try {
      // The server restarts a crashed kernel asynchronously: a socket opened while it does may never see a reply.
      // Each attempt gets a bounded handshake; a silent one reopens the socket rather than waiting out the deadline.
      for (let attempt = 1; ; attempt++) {
        const timeoutMs = Math.min(recovery.maxAttemptTimeoutMs, recovery.attemptTimeoutMs * attempt);
        const step = abortScope({ signal: scope.signal, timeoutMs, clock });
        try {
          await reconnect(step.signal);
          break;
        } catch (error) {
          if (!step.timedOut || !alive()) throw error;
        } finally {
          step.dispose();
        }
      }
      if (alive()) ready();
    } catch (error) {
      if (!(await checkGone()) && alive()) giveUp(error);
    } finally {
      scope.dispose();
    }
  }
}
