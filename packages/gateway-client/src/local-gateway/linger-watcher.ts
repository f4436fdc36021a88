import type { GatewayLayout } from './layout.js';
import type { ProcessIdentity } from './process-identity.js';
import { type SpawnedProcess, spawnDetached } from './server-process.js';
import { writePrivateFileAtomic } from './state-dir.js';

/** What the watcher is told at spawn (one JSON argument: paths and pids, never the token). */
export interface WatcherConfig {
  layout: GatewayLayout;
  server: ProcessIdentity;
  /** Linger used when the last holder died without releasing (no linger promise in `idle.json`). */
  defaultLingerMs: number;
  pollMs: number;
  graceMs: number;
}

/**
 * The watcher: a tiny detached Node process, one per running server. Every `pollMs` it prunes dead lease holders;
 * once there is no live holder and the linger has run out (the promise in `idle.json`, else `defaultLingerMs`
 * from when it first saw no holder), it takes the gateway lock — the same protocol as `lock.ts`: an exclusive
 * `link()`, stale-owner takeover under `<lock>.takeover` — checks again, stops the server (SIGTERM to its group,
 * SIGKILL after the grace, then leftover kernels), removes the server's state files and exits. It also exits as
 * soon as the server exits for any other reason.
 *
 * It is plain CommonJS written to the state directory, because it must run without this package's build (and
 * without a TypeScript loader) in a process of its own. Keep it small; `linger-watcher.test.ts` runs it against
 * stand-in processes and `local-gateway.integration.test.ts` against jupyter-server.
 */
const WATCHER_SOURCE = String.raw`'use strict';
const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');
const cfg = JSON.parse(process.argv[2]);
const L = cfg.layout;
const log = (msg) => { try { fs.appendFileSync(L.watcherLog, new Date().toISOString() + ' ' + msg + '\n', { mode: 0o600 }); } catch {} };
const me = { pid: process.pid, startTime: stat(process.pid)?.startTime };

function stat(pid) {
  try {
    const text = fs.readFileSync('/proc/' + pid + '/stat', 'utf8');
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: f[0], startTime: f[19] };
  } catch { return undefined; }
}
function alive(id) {
  if (!id || !Number.isInteger(id.pid) || id.pid <= 0) return false;
  const s = stat(id.pid);
  if (!s) {
    if (fs.existsSync('/proc/self/stat')) return false;
    try { process.kill(id.pid, 0); return true; } catch (e) { return e.code === 'EPERM'; }
  }
  if (s.state === 'Z' || s.state === 'X' || s.state === 'x') return false;
  return id.startTime === undefined || id.startTime === s.startTime;
}
function readJson(file) { try { return JSON.parse(fs.readFileSync(file, 'utf8')); } catch { return undefined; } }
function rm(file) { try { fs.unlinkSync(file); } catch {} }
function liveHolders() {
  let names = [];
  try { names = fs.readdirSync(L.leases); } catch {}
  let n = 0;
  for (const name of names) {
    if (!name.endsWith('.json')) continue;
    const file = path.join(L.leases, name);
    const rec = readJson(file);
    if (rec && alive(rec)) n++; else rm(file);
  }
  return n;
}
function tmpFile(target, text) {
  const tmp = path.join(path.dirname(target), '.' + process.pid + '.' + crypto.randomBytes(4).toString('hex') + '.tmp');
  fs.writeFileSync(tmp, text, { mode: 0o600, flag: 'wx' });
  return tmp;
}
function age(file) { try { return Date.now() - fs.statSync(file).mtimeMs; } catch { return 0; } }
function tryLock() {
  const content = JSON.stringify({ pid: me.pid, startTime: me.startTime, acquiredAt: new Date().toISOString() });
  const tmp = tmpFile(L.lock, content);
  try { fs.linkSync(tmp, L.lock); return content; } catch (e) { if (e.code !== 'EEXIST') throw e; } finally { rm(tmp); }
  let seen;
  try { seen = fs.readFileSync(L.lock, 'utf8'); } catch { return undefined; }
  let owner; try { owner = JSON.parse(seen); } catch {}
  const stale = owner && typeof owner.pid === 'number' ? !alive(owner) : age(L.lock) > 10000;
  if (!stale) return undefined;
  const marker = L.lock + '.takeover';
  const mtmp = tmpFile(marker, JSON.stringify(me));
  try { fs.linkSync(mtmp, marker); } catch (e) { if (age(marker) > 10000) rm(marker); return undefined; } finally { rm(mtmp); }
  try { if (fs.readFileSync(L.lock, 'utf8') === seen) rm(L.lock); } catch {} finally { rm(marker); }
  return undefined;
}
function unlock(content) { try { if (fs.readFileSync(L.lock, 'utf8') === content) rm(L.lock); } catch {} }
function infoNamesOurServer() {
  const info = readJson(L.info);
  return !!info && info.server && info.server.pid === cfg.server.pid && info.server.startTime === cfg.server.startTime;
}
function signalGroup(pid, sig) { try { process.kill(-pid, sig); } catch { try { process.kill(pid, sig); } catch {} } }
function kernelPids() {
  const out = [];
  let entries = [];
  try { entries = fs.readdirSync('/proc'); } catch {}
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    try { if (fs.readFileSync('/proc/' + e + '/cmdline', 'utf8').includes(L.runtime + '/kernel-')) out.push(Number(e)); } catch {}
  }
  return out;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitGone(id, ms) { const until = Date.now() + ms; while (alive(id)) { if (Date.now() > until) return false; await sleep(50); } return true; }
function removeState() {
  rm(L.info); rm(L.idle); rm(L.tokenFile);
  for (const dir of [L.owners, L.leases]) { let names = []; try { names = fs.readdirSync(dir); } catch {} for (const n of names) rm(path.join(dir, n)); }
}
async function stopServer(reason) {
  log('stopping server pid ' + cfg.server.pid + ': ' + reason);
  if (alive(cfg.server)) {
    signalGroup(cfg.server.pid, 'SIGTERM');
    if (!(await waitGone(cfg.server, cfg.graceMs))) { signalGroup(cfg.server.pid, 'SIGKILL'); await waitGone(cfg.server, 2000); }
  }
  const left = kernelPids().map((pid) => ({ pid, startTime: stat(pid)?.startTime }));
  for (const k of left) signalGroup(k.pid, 'SIGKILL');
  for (const k of left) await waitGone(k, 2000);
}
let idleSince;
let busy = false;
let lastError;
async function tick() {
  if (busy) return;
  busy = true;
  try {
    if (!alive(cfg.server)) {
      const held = tryLock();
      if (held) { if (infoNamesOurServer()) removeState(); unlock(held); }
      log('server pid ' + cfg.server.pid + ' is gone; exiting');
      process.exit(0);
    }
    if (!infoNamesOurServer()) { log('the info file names another server; exiting'); process.exit(0); }
    if (liveHolders() > 0) { idleSince = undefined; return; }
    const marker = readJson(L.idle);
    if (idleSince === undefined) idleSince = Date.now();
    // A release's promise (idle.json) wins; without one (the last holder died), the starter's linger counts from
    // when the watcher first saw no holder.
    const until = marker && typeof marker.until === 'number' ? marker.until : idleSince + cfg.defaultLingerMs;
    if (Date.now() < until) return;
    const held = tryLock();
    if (!held) return;
    try {
      if (!infoNamesOurServer() || liveHolders() > 0) return;
      await stopServer('no holder, and the linger ran out at ' + new Date(until).toISOString());
      removeState();
    } finally { unlock(held); }
    process.exit(0);
  } catch (e) {
    const message = 'error: ' + (e && e.message);
    if (message !== lastError) log(message); // once per distinct error, not once per tick
    lastError = message;
  } finally { busy = false; }
}
log('watching server pid ' + cfg.server.pid);
setInterval(tick, cfg.pollMs);
tick();
`;

/** Writes the watcher script and starts it for `config.server`. */
export function spawnLingerWatcher(config: WatcherConfig): SpawnedProcess {
  writePrivateFileAtomic(config.layout.watcherScript, WATCHER_SOURCE);
  return spawnDetached(process.execPath, [config.layout.watcherScript, JSON.stringify(config)], {
    env: { PATH: process.env.PATH ?? '' },
    logFile: config.layout.watcherLog,
    cwd: config.layout.dir,
  });
}
