import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { lazy } from '@kernelwarden/core';
import { type ProcessIdentity, processCmdline } from '@kernelwarden/core/os';
import type { ServerInfo } from './info-file.js';
import type { GatewayLayout } from './layout.js';
import type { HeldLock } from './lock.js';
import { type SpawnedProcess, spawnDetached } from './server-process.js';
import { zod } from './zod.js';

/** What the watcher is told at spawn (one JSON argument: paths, pids and timings, never the token). */
export interface WatcherConfig {
  /** The gateway directory (`<stateDir>/gateway-<key>`). */
  dir: string;
  /** The server it watches. */
  server: ProcessIdentity;
  /** The server run's id: stopping it also sweeps every process carrying one of its kernels' markers. */
  instance?: string | undefined;
  /** Linger used when the last holder died without releasing (no linger promise in `idle.json`). */
  defaultLingerMs: number;
  /** Milliseconds between two looks. */
  pollMs: number;
  /** Grace between SIGTERM and SIGKILL when it stops the server. */
  graceMs: number;
}

const configSchema = lazy(() => {
  const { z } = zod();
  const identitySchema = z.object({ pid: z.number().int(), startTime: z.string().optional() });
  return z.object({
    dir: z.string().startsWith('/'),
    server: identitySchema,
    instance: z.string().optional(),
    defaultLingerMs: z.number().finite().nonnegative(),
    pollMs: z.number().finite().positive(),
    graceMs: z.number().finite().nonnegative(),
  });
});

/** Reads the watcher's configuration from its argument; throws on anything else. */
export function parseWatcherConfig(text: string | undefined): WatcherConfig {
  return configSchema().parse(JSON.parse(text ?? ''));
}

/**
 * Everything one look of the watcher reads or does, so that its decisions can be driven by tests with fakes.
 * `now()` is wall-clock milliseconds (the linger promise in `idle.json` is an epoch time).
 */
export interface WatcherWorld {
  now(): number;
  /** The watched server's process still runs (same pid and start time). */
  serverAlive(): boolean;
  /** `server.json` still names the watched server (no other server replaced it). */
  recordNamesServer(): boolean;
  /** How many ticket holders are alive (the files of dead ones are pruned). */
  liveHolders(): number;
  /** The linger promise of the last release (`idle.json`), epoch ms; undefined when none was made. */
  lingerUntil(): number | undefined;
  /** Takes the gateway lock without waiting (a dead owner's lock is taken over); undefined when it is held. */
  tryLock(): HeldLock | undefined;
  /** Stops the recorded server (if still running), sweeps its kernels and clears its state. */
  stopServer(reason: string): Promise<void>;
  log(message: string): void;
}

/** What one look concluded: keep watching, or exit (the server is stopped or no longer this watcher's). */
export type WatcherOutcome = 'watching' | 'exit';

/** The watcher's decisions, one `tick()` per look. */
export interface LingerWatcher {
  /** One look; looks never overlap (a tick while one runs returns `'watching'` at once). Never rejects. */
  tick(): Promise<WatcherOutcome>;
}

/**
 * The linger watcher's logic. Each look: when the server has exited on its own, clear its state (under the lock,
 * if `server.json` still names it; a failure to is only logged) and exit; when `server.json` names another server, exit; while a holder lives,
 * keep watching. With no holder, the linger runs until the promise in `idle.json`, or — when the last holder died
 * without releasing — `defaultLingerMs` after this watcher first saw no holder. Once it has run out, take the lock,
 * check again, stop the server and exit. An error is logged (once per distinct message) and the next look retries.
 */
export function lingerWatcher(config: Pick<WatcherConfig, 'defaultLingerMs'>, world: WatcherWorld): LingerWatcher {
  let idleSince: number | undefined;
  let busy = false;
  let lastError: string | undefined;

  async function look(): Promise<WatcherOutcome> {
    if (!world.serverAlive()) {
      try {
        const held = world.tryLock();
        if (held) {
          try {
            if (world.recordNamesServer()) await world.stopServer('the server exited on its own');
          } finally {
            held.release();
          }
        }
      } catch (error) {
        // The next acquire clears what is left; a watcher without a server has nothing more to do.
        world.log(`error: ${(error as Error)?.message}`);
      }
      world.log('the server is gone; exiting');
      return 'exit';
    }
    if (!world.recordNamesServer()) {
      world.log('the info file names another server; exiting');
      return 'exit';
    }
    if (world.liveHolders() > 0) {
      idleSince = undefined;
      return 'watching';
    }
    const now = world.now();
    idleSince ??= now;
    // A release's promise wins; without one (the last holder died), the starter's linger counts from when this
    // watcher first saw no holder.
    const until = world.lingerUntil() ?? idleSince + config.defaultLingerMs;
    if (now < until) return 'watching';
    const held = world.tryLock();
    if (!held) return 'watching';
    try {
      if (!world.recordNamesServer() || world.liveHolders() > 0) return 'watching';
      await world.stopServer(`no holder, and the linger ran out at ${new Date(until).toISOString()}`);
      return 'exit';
    } finally {
      held.release();
    }
  }

  return {
    async tick() {
      if (busy) return 'watching';
      busy = true;
      try {
        return await look();
      } catch (error) {
        const message = `error: ${(error as Error)?.message}`;
        if (message !== lastError) world.log(message); // once per distinct error, not once per look
        lastError = message;
        return 'watching';
      } finally {
        busy = false;
      }
    },
  };
}

/** The file name of the watcher's built entry (`src/linger-watcher-main.ts`). */
const ENTRY_NAME = 'linger-watcher-main.js';

/**
 * The watcher's built entry: beside this module in `dist/` (its chunk is there too). Run from the sources (the
 * tests), this module is a `.ts` file, and the entry is taken from the package's build. Bundled into an
 * application's single file, this module finds the entry in the installed package instead (the application depends
 * on `@kernelwarden/local-gateway`, so its location resolves it).
 */
export function lingerWatcherEntry(): string {
  const here = import.meta.url;
  const beside = fileURLToPath(new URL(here.endsWith('.ts') ? `../dist/${ENTRY_NAME}` : `./${ENTRY_NAME}`, here));
  if (existsSync(beside)) return beside;
  let installed: string | undefined;
  try {
    const manifest = createRequire(here).resolve('@kernelwarden/local-gateway/package.json');
    installed = join(dirname(manifest), 'dist', ENTRY_NAME);
  } catch {
    // not installed where this bundle is
  }
  if (installed !== undefined && existsSync(installed)) return installed;
  throw new Error(
    `The local gateway's linger watcher ${beside} is missing: build @kernelwarden/local-gateway, or, when bundling it into an application, install @kernelwarden/local-gateway beside the bundle (its dist/${ENTRY_NAME} runs as a process of its own)`,
  );
}

/** How often a watcher looks, for a linger of `lingerMs`: a tenth of it, between 100 ms and 1 s. */
export function watcherPollMs(lingerMs: number): number {
  return Math.min(1_000, Math.max(100, Math.floor(lingerMs / 10)));
}

/**
 * Starts the linger watcher of the server `info` records: a detached Node process running the built entry with
 * its configuration as one JSON argument (no token), its output appended to `linger-watcher.log`.
 */
export function spawnLingerWatcher(opts: {
  layout: GatewayLayout;
  info: Pick<ServerInfo, 'server' | 'instance'>;
  defaultLingerMs: number;
  graceMs: number;
}): SpawnedProcess {
  const config: WatcherConfig = {
    dir: opts.layout.dir,
    server: opts.info.server,
    instance: opts.info.instance,
    defaultLingerMs: opts.defaultLingerMs,
    pollMs: watcherPollMs(opts.defaultLingerMs),
    graceMs: opts.graceMs,
  };
  return spawnDetached(process.execPath, [lingerWatcherEntry(), JSON.stringify(config)], {
    env: { PATH: process.env.PATH ?? '' },
    logFile: opts.layout.watcherLog,
    cwd: opts.layout.dir,
  });
}

/**
 * Whether process `pid` is a linger watcher of this gateway: its command line runs the watcher entry (of any
 * installed copy of this package) with this gateway's directory. Where the process table cannot be read, it cannot tell: true.
 */
export function isLingerWatcherOf(layout: GatewayLayout, pid: number): boolean {
  const args = processCmdline(pid);
  if (args === undefined) return process.platform !== 'linux';
  const at = args.findIndex((arg) => arg.endsWith(`/${ENTRY_NAME}`));
  if (at < 0) return false;
  try {
    return (JSON.parse(args[at + 1] ?? '') as Partial<WatcherConfig>).dir === layout.dir;
  } catch {
    return false;
  }
}
