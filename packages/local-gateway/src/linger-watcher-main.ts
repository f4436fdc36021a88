/**
 * The linger watcher's process: one per running server, started detached by `spawnLingerWatcher` with its
 * configuration as its only argument. It looks every `pollMs` (see `lingerWatcher` for what it decides) and exits
 * once the server is stopped or no longer its own. Built as an entry of its own (`dist/linger-watcher-main.js`).
 */
import { appendFileSync } from 'node:fs';
import { isProcessAlive } from '@kernelwarden/core/os';
import { GatewayKernel } from '@kernelwarden/gateway-client';
import { KERNEL_LOG_PRUNE_INTERVAL_MS, pruneKernelLogs } from './gateway-dir.js';
import { serverClient } from './guarded-transport.js';
import { readServerInfo } from './info-file.js';
import {
  abandonedClaims,
  addReadyKernel,
  pooledKernelspecs,
  readPoolConfig,
  readyKernels,
  takeSurplus,
  watchPoolClaims,
} from './kernel-pool.js';
import { gatewayLayout } from './layout.js';
import { lingerWatcher, parseWatcherConfig, type WatcherWorld } from './linger-watcher.js';
import { tryAcquireLock } from './lock.js';
import { DEFAULT_REQUEST_TIMEOUT_MS, DEFAULT_STARTUP_TIMEOUT_MS } from './options.js';
import { poolKeeper } from './pool-keeper.js';
import { stopRecordedServer } from './server-shutdown.js';
import { lingerUntil, liveTickets, watchTicketReleases } from './tickets.js';

const config = parseWatcherConfig(process.argv[2]);
const layout = gatewayLayout(config.dir);

function log(message: string): void {
  try {
    appendFileSync(layout.watcherLog, `${new Date().toISOString()} ${message}\n`, { mode: 0o600 });
  } catch {
    // nowhere to report it
  }
}

function recordNamesServer(): boolean {
  const info = readServerInfo(layout.info);
  return info?.server.pid === config.server.pid && info.server.startTime === config.server.startTime;
}

const world: WatcherWorld = {
  now: () => Date.now(),
  serverAlive: () => isProcessAlive(config.server),
  recordNamesServer,
  liveHolders: () => liveTickets(layout.tickets).length,
  lingerUntil: () => lingerUntil(layout.idle),
  tryLock: () => tryAcquireLock(layout.lock),
  async stopServer(reason) {
    log(`stopping server pid ${config.server.pid}: ${reason}`);
    // The record names this server (checked under the lock just before): stop it as `LocalGateway.stop()` would.
    const info = readServerInfo(layout.info);
    await stopRecordedServer(layout, info && { ...info, instance: info.instance ?? config.instance }, config.graceMs);
  },
  log,
};

/** A client of the watched server (its token read from `server.json`, which must still name it). */
function client() {
  const info = readServerInfo(layout.info);
  if (!info || !recordNamesServer()) throw new Error('the info file no longer names the watched server');
  return serverClient(info, DEFAULT_REQUEST_TIMEOUT_MS);
}

// The warm pool lives as long as the server: this watcher keeps it filled, and its kernels go with the server.
const pool = poolKeeper({
  now: () => Date.now(),
  wanted: () => readPoolConfig(layout),
  pooled: () => pooledKernelspecs(layout),
  ready: (kernelName) => readyKernels(layout, kernelName),
  async start(kernelName) {
    // Started like any kernel of the server (ipc, own log, marker), with nothing of any process's: a claimant
    // applies its own cwd, env and prelude. One silent no-op cell makes its first real cell as quick as a later one.
    const kernel = await GatewayKernel.start({
      gateway: client(),
      kernelName,
      startupTimeoutMs: DEFAULT_STARTUP_TIMEOUT_MS,
    });
    try {
      const warm = await kernel.execute('pass', { silent: true, storeHistory: false, timeoutMs: 30_000 });
      if (warm.status !== 'ok') throw new Error(`its first cell ended ${warm.status}`);
    } catch (error) {
      await kernel.shutdown();
      throw error;
    }
    kernel.detach();
    return kernel.id;
  },
  add: (kernelName, kernelId) => addReadyKernel(layout, kernelName, kernelId),
  surplus: (kernelName, keep) => takeSurplus(layout, kernelName, keep),
  abandoned: () => abandonedClaims(layout),
  async remove(kernelId) {
    await client().deleteKernel(kernelId);
  },
  log,
});

const watcher = lingerWatcher(config, world);
let prunedAt = Number.NEGATIVE_INFINITY;
async function look(): Promise<void> {
  if ((await watcher.tick()) === 'exit') process.exit(0);
  pool.tick();
  // The logs of kernels long gone go in the background, not at the start of every command (one stat per log).
  if (Date.now() - prunedAt >= KERNEL_LOG_PRUNE_INTERVAL_MS) {
    prunedAt = Date.now();
    pruneKernelLogs(layout);
  }
}
// A claimed kernel's replacement starts at the claim (see watchPoolClaims), not at the next look; a command that ends
// is looked at too (see watchTicketReleases): its kernel may have been one it created, not claimed.
watchPoolClaims(layout.poolClaims, () => pool.tick());
watchTicketReleases(layout.tickets, () => pool.tick());
log(`watching server pid ${config.server.pid}`);
setInterval(() => void look(), config.pollMs);
void look();
