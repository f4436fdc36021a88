import { isProcessAlive } from '@kernelwarden/core/os';
import { acquireTicket } from './acquire.js';
import { locateGateway, prepareGatewayDir } from './gateway-dir.js';
import { readServerInfo } from './info-file.js';
import { acquireLock } from './lock.js';
import {
  type LocalGatewayLocation,
  type LocalGatewayOptions,
  type LocalGatewayStopOptions,
  resolveLocation,
  resolveStopOptions,
} from './options.js';
import { shutDownServer, stopRecordedServer } from './server-shutdown.js';
import { gatewayStatus, type LocalGatewayStatus } from './status.js';
import type { LocalGatewayTicket } from './ticket.js';

/**
 * The embedded Jupyter server: one `jupyter-server` per user and interpreter, on 127.0.0.1 with a random token,
 * shared across processes through reference-counted tickets, stopped after an idle linger.
 *
 * Use it when you want kernels without running a server yourself: `acquire()` a ticket, pass it as the `gateway`
 * of `GatewayKernel.start()`, release it when done. `stop()` and `status()` serve the CLI.
 */
export class LocalGateway {
  /**
   * Starts the embedded server, or reuses the one already running for this user and interpreter, and takes a
   * ticket on it. Kernels whose creating process has died are deleted before it returns.
   *
   * Rejects with `InvalidOptionsError` (naming the field), `LocalGatewayError`, `GatewayUnavailableError` (the
   * server would not start; its log's tail is in the message), a `TimeoutError` (`startupTimeoutMs`), or the
   * signal's reason.
   */
  static acquire(options: LocalGatewayOptions = {}): Promise<LocalGatewayTicket> {
    return acquireTicket(options);
  }

  /**
   * Stops the embedded server now, whoever holds tickets (SIGTERM, SIGKILL after `stopTimeoutMs`, then any kernel
   * process left), and clears its state. Resolves `{ stopped: false }` when none was running.
   */
  static async stop(options: LocalGatewayStopOptions = {}): Promise<{ stopped: boolean; pid?: number }> {
    const opts = resolveStopOptions(options);
    const { layout } = locateGateway(opts);
    prepareGatewayDir(layout);
    const lock = await acquireLock(layout.lock, { signal: opts.signal });
    try {
      const info = readServerInfo(layout.info);
      if (!info) {
        await stopRecordedServer(layout, undefined, 0);
        return { stopped: false };
      }
      const wasAlive = isProcessAlive(info.server);
      await shutDownServer(layout, info, opts.stopTimeoutMs);
      return wasAlive ? { stopped: true, pid: info.server.pid } : { stopped: false };
    } finally {
      lock.release();
    }
  }

  /** Reports whether the embedded server runs, where, who holds tickets and which kernels it has. Read-only. */
  static async status(options: LocalGatewayLocation = {}): Promise<LocalGatewayStatus> {
    return gatewayStatus(resolveLocation(options));
  }
}
