/**
 * The linger watcher's process: one per running server, started detached by `spawnLingerWatcher` with its
 * configuration as its only argument. It looks every `pollMs` (see `lingerWatcher` for what it decides) and exits
 * once the server is stopped or no longer its own. Built as an entry of its own (`dist/linger-watcher-main.js`).
 */
import { appendFileSync } from 'node:fs';
import { readServerInfo } from './info-file.js';
import { gatewayLayout } from './layout.js';
import { lingerUntil, liveLeases } from './leases.js';
import { lingerWatcher, parseWatcherConfig, type WatcherWorld } from './linger-watcher.js';
import { tryAcquireLock } from './lock.js';
import { isProcessAlive } from './process-identity.js';
import { stopRecordedServer } from './server-shutdown.js';

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
  liveHolders: () => liveLeases(layout.leases).length,
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

const watcher = lingerWatcher(config, world);
async function look(): Promise<void> {
  if ((await watcher.tick()) === 'exit') process.exit(0);
}
log(`watching server pid ${config.server.pid}`);
setInterval(() => void look(), config.pollMs);
void look();
