import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { identityOf, isProcessAlive, type ProcessIdentity } from '@kernelwarden/core/os';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { writeServerInfo } from './info-file.js';
import { type GatewayLayout, gatewayLayout } from './layout.js';
import { spawnLingerWatcher } from './linger-watcher.js';
import { addTicket, markIdle } from './tickets.js';

let layout: GatewayLayout;
const started: ChildProcess[] = [];

beforeEach(() => {
  layout = gatewayLayout(mkdtempSync(join(tmpdir(), 'kw-watcher-')));
  for (const dir of [layout.tickets, layout.owners, layout.runtime]) mkdirSync(dir, { recursive: true });
});

afterEach(async () => {
  for (const child of started.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await gone;
    }
  }
  rmSync(layout.dir, { recursive: true, force: true });
});

async function waitFor(what: string, check: () => boolean, timeoutMs = 15_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * A stand-in for this gateway's jupyter-server: a long-running process in a process group of its own, started with the
 * gateway's config dir in its environment (what the watcher checks before it signals a recorded server).
 */
async function fakeServer(): Promise<ProcessIdentity> {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], {
    detached: true,
    stdio: 'ignore',
    env: { PATH: process.env.PATH ?? '', JUPYTER_CONFIG_DIR: layout.config },
  });
  started.push(child);
  await waitFor('the fake server', () => child.pid !== undefined && isProcessAlive(identityOf(child.pid)));
  return identityOf(child.pid!);
}

function recordServer(server: ProcessIdentity, instance?: string): void {
  writeServerInfo(layout.info, {
    version: 1,
    baseUrl: 'http://127.0.0.1:9',
    port: 9,
    token: 'not-a-real-token',
    server,
    command: 'fake',
    interpreter: 'fake',
    startedAt: new Date().toISOString(),
    lingerMs: 0,
    ...(instance ? { instance } : {}),
  });
}

describe('the linger watcher process', () => {
  it('waits while a holder lives, then stops the server after the linger, taking over a stale lock', async () => {
    const server = await fakeServer();
    recordServer(server);
    const ticket = addTicket(layout.tickets, 0);
    // A lock left by a process that no longer exists: the watcher must take it over to stop the server.
    writeFileSync(layout.lock, JSON.stringify({ pid: server.pid, startTime: 'long-gone', acquiredAt: 'then' }));
    const watcher = spawnLingerWatcher({ layout, info: { server }, defaultLingerMs: 0, graceMs: 2_000 });
    started.push(watcher.child);
    await waitFor('the watcher to start', () => existsSync(layout.watcherLog));
    expect(isProcessAlive(server)).toBe(true);

    rmSync(ticket);
    markIdle(layout.idle, 100);
    markIdle(layout.idle, 10); // a shorter linger never cuts the promise of a longer one
    expect(await watcher.exited).toBe('exit code 0');
    expect(isProcessAlive(server)).toBe(false);
    expect(existsSync(layout.info)).toBe(false);
    expect(existsSync(layout.idle)).toBe(false);
    expect(existsSync(layout.lock)).toBe(false);
    expect(readdirSync(layout.dir).filter((n) => n.endsWith('.tmp') || n.startsWith('.'))).toEqual([]);
    expect(readFileSync(layout.watcherLog, 'utf8')).not.toMatch(/error:/);
  });

  it('exits, leaving the server alone, when the info file names another server', async () => {
    const server = await fakeServer();
    recordServer({ pid: server.pid, startTime: 'another-start' });
    const watcher = spawnLingerWatcher({ layout, info: { server }, defaultLingerMs: 0, graceMs: 2_000 });
    started.push(watcher.child);
    expect(await watcher.exited).toBe('exit code 0');
    expect(isProcessAlive(server)).toBe(true);
    expect(existsSync(layout.info)).toBe(true);
    expect(readFileSync(layout.watcherLog, 'utf8')).not.toMatch(/error:/);
  });

  it("stops the server once its only holder died, and kills what its kernels left, found by the run's marker", async () => {
    const server = await fakeServer();
    const instance = 'a1b2c3d4e5f60718';
    recordServer(server, instance);
    // A holder that died without releasing: its ticket file names a process that is gone.
    writeFileSync(join(layout.tickets, 'gone.json'), JSON.stringify({ pid: server.pid, startTime: 'long-gone' }));
    // What a kernel of this run started, in a process group of its own: only the marker in its environment names it.
    const leftover = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], {
      detached: true,
      stdio: 'ignore',
      env: { PATH: process.env.PATH ?? '', KERNELWARDEN_KERNEL: `${instance}:some-kernel` },
    });
    started.push(leftover);
    const kernel = identityOf(leftover.pid!);
    const watcher = spawnLingerWatcher({ layout, info: { server, instance }, defaultLingerMs: 0, graceMs: 2_000 });
    started.push(watcher.child);
    expect(await watcher.exited).toBe('exit code 0');
    expect(isProcessAlive(server)).toBe(false);
    expect(isProcessAlive(kernel)).toBe(false);
    expect(readdirSync(layout.tickets)).toEqual([]);
    expect(existsSync(layout.info)).toBe(false);
    expect(readFileSync(layout.watcherLog, 'utf8')).toMatch(/no holder, and the linger ran out/);
  });

  it('exits and clears the info file when the server dies on its own', async () => {
    const server = await fakeServer();
    recordServer(server);
    addTicket(layout.tickets, 60_000);
    const watcher = spawnLingerWatcher({ layout, info: { server }, defaultLingerMs: 60_000, graceMs: 2_000 });
    started.push(watcher.child);
    await waitFor('the watcher to start', () => existsSync(layout.watcherLog));
    process.kill(server.pid, 'SIGKILL');
    expect(await watcher.exited).toBe('exit code 0');
    expect(existsSync(layout.info)).toBe(false);
    expect(readFileSync(layout.watcherLog, 'utf8')).not.toMatch(/error:/);
  });
});
