import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InvalidOptionsError } from '@kernelwarden/core';
import { currentProcess, identityOf, isProcessAlive, type ProcessIdentity } from '@kernelwarden/core/os';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LocalGateway, LocalGatewayError } from './index.js';
import { readServerInfo, writeServerInfo } from './info-file.js';
import { acquireLock, tryAcquireLock } from './lock.js';
import { forgetOwner, listOwners, recordOwner } from './ownership.js';
import { resolveServerCommand } from './server-command.js';
import { addTicket, clearExpiredIdle, lingerPending, liveTickets, markIdle } from './tickets.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'kw-local-gateway-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** A process that has exited (its pid is free again). */
function deadProcess(): ProcessIdentity {
  const result = spawnSync(process.execPath, [
    '-e',
    'console.log(require("fs").readFileSync("/proc/self/stat","utf8"))',
  ]);
  const stat = result.stdout.toString();
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { pid: result.pid ?? -1, startTime: fields[19] };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
}

describe('LocalGateway options', () => {
  it('names the bad field of invalid options', async () => {
    const negative = await rejection(LocalGateway.acquire({ stateDir: dir, lingerMs: -1 }));
    expect(InvalidOptionsError.isInstance(negative)).toBe(true);
    expect((negative as InvalidOptionsError).path).toBe('lingerMs');

    const unknown = await rejection(LocalGateway.acquire({ stateDir: dir, lingerMS: 5 } as never));
    expect((unknown as InvalidOptionsError).message).toMatch(/lingerMS/);

    const bad = await rejection(LocalGateway.stop({ stopTimeoutMs: Number.NaN }));
    expect((bad as InvalidOptionsError).path).toBe('stopTimeoutMs');
  });

  it('refuses server arguments that would put the token on a command line or move the server off loopback', async () => {
    for (const arg of ['--ServerApp.token=abc', '--IdentityProvider.token=abc', '--ip=0.0.0.0', '--ServerApp.ip=::']) {
      const error = await rejection(LocalGateway.acquire({ stateDir: dir, serverArgs: ['--debug', arg] }));
      expect((error as InvalidOptionsError).path, arg).toBe('serverArgs.1');
      expect((error as Error).message.includes('abc')).toBe(false);
    }
  });

  it('times out waiting for the lock with a TimeoutError naming the holder, starting nothing', async () => {
    const fake = join(dir, 'jupyter-server');
    writeFileSync(fake, '#!/bin/sh\nexit 1\n');
    chmodSync(fake, 0o755);
    const { stateDir } = await LocalGateway.status({ stateDir: dir, command: fake });
    mkdirSync(stateDir, { recursive: true });
    const held = await acquireLock(join(stateDir, 'lock'));
    try {
      const error = await rejection(LocalGateway.acquire({ stateDir: dir, command: fake, startupTimeoutMs: 200 }));
      expect((error as Error).name).toBe('TimeoutError');
      expect((error as Error).message).toMatch(new RegExp(`lock held by pid ${process.pid}`));
      expect(existsSync(join(stateDir, 'server.log'))).toBe(false);
    } finally {
      held.release();
    }
  });

  it('refuses a state directory that is a symlink planted to elsewhere', async () => {
    const { stateDir } = await LocalGateway.status({ stateDir: dir });
    const elsewhere = join(dir, 'elsewhere');
    mkdirSync(elsewhere, { mode: 0o700 });
    symlinkSync(elsewhere, stateDir);
    const error = await rejection(LocalGateway.acquire({ stateDir: dir }));
    expect((error as LocalGatewayError).code).toBe('LOCAL_GATEWAY_STATE_DIR');
    expect(readdirSync(elsewhere)).toEqual([]);
  });

  it('says what to install when jupyter-server cannot be found', async () => {
    const error = await rejection(LocalGateway.acquire({ stateDir: dir, command: join(dir, 'no-such-server') }));
    expect(LocalGatewayError.isInstance(error)).toBe(true);
    expect((error as LocalGatewayError).code).toBe('LOCAL_GATEWAY_COMMAND');
    expect((error as Error).message).toMatch(/install jupyter_server/);
  });

  it('reports no server for a state dir that has none', async () => {
    const status = await LocalGateway.status({ stateDir: dir });
    expect(status).toMatchObject({ running: false, holders: [], kernels: [] });
    expect(status.stateDir.startsWith(join(dir, 'gateway-'))).toBe(true);
  });
});

describe('process identity', () => {
  it('tells a live process from a dead one and from a reused pid', () => {
    const me = currentProcess();
    expect(isProcessAlive(me)).toBe(true);
    expect(isProcessAlive({ pid: me.pid, startTime: `${me.startTime}0` })).toBe(false);
    expect(isProcessAlive(deadProcess())).toBe(false);
    expect(isProcessAlive(identityOf(deadProcess().pid))).toBe(false);
  });
});

describe('lock', () => {
  it('makes a second acquirer wait for the holder, then hands it the lock', async () => {
    const path = join(dir, 'lock');
    const first = await acquireLock(path);
    let waiting!: () => void;
    const sawOwner = new Promise<void>((r) => (waiting = r));
    let secondHeld = false;
    const second = acquireLock(path, { onWait: () => waiting() }).then((lock) => {
      secondHeld = true;
      return lock;
    });
    await sawOwner;
    expect(secondHeld).toBe(false);
    first.release();
    const lock = await second;
    expect(JSON.parse(readFileSync(path, 'utf8')).pid).toBe(process.pid);
    lock.release();
    expect(existsSync(path)).toBe(false);
  });

  it('takes over the lock of a killed owner, and of an owner whose pid was reused', async () => {
    const path = join(dir, 'lock');
    for (const owner of [deadProcess(), { pid: process.pid, startTime: 'another-start' }]) {
      writeFileSync(path, JSON.stringify({ ...owner, acquiredAt: new Date().toISOString() }));
      const previous: (number | undefined)[] = [];
      const lock = await acquireLock(path, { onTakeover: (p) => previous.push(p?.pid) });
      expect(previous).toEqual([owner.pid]);
      expect(existsSync(`${path}.takeover`)).toBe(false);
      lock.release();
    }
  });

  it('rejects with the signal reason while a live owner holds the lock', async () => {
    const path = join(dir, 'lock');
    const held = await acquireLock(path);
    const controller = new AbortController();
    const reason = new Error('caller gave up');
    const waiting = acquireLock(path, { signal: controller.signal, onWait: () => controller.abort(reason) });
    await expect(waiting).rejects.toBe(reason);
    held.release();
  });

  it("tries once without waiting: a free lock or a dead owner's is taken, a live owner's is not", async () => {
    const path = join(dir, 'lock');
    const held = await acquireLock(path);
    expect(tryAcquireLock(path)).toBeUndefined();
    held.release();
    const free = tryAcquireLock(path);
    expect(free).toBeDefined();
    free?.release();
    writeFileSync(path, JSON.stringify({ ...deadProcess(), acquiredAt: new Date().toISOString() }));
    const takenOver = tryAcquireLock(path);
    expect(JSON.parse(readFileSync(path, 'utf8')).pid).toBe(process.pid);
    takenOver?.release();
    expect(existsSync(path)).toBe(false);
  });
});

describe('state files', () => {
  it('writes the info file with mode 0600 and treats a malformed one as no server', () => {
    const path = join(dir, 'server.json');
    writeServerInfo(path, {
      version: 1,
      baseUrl: 'http://127.0.0.1:1',
      port: 1,
      token: 't'.repeat(64),
      server: { pid: 1, startTime: '1' },
      command: '/usr/bin/jupyter-server',
      interpreter: '/usr/bin/python3',
      startedAt: new Date().toISOString(),
      lingerMs: 0,
    });
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readServerInfo(path)?.baseUrl).toBe('http://127.0.0.1:1');
    writeFileSync(path, '{"version":1,');
    expect(readServerInfo(path)).toBeUndefined();
  });

  it('prunes the tickets of dead holders', () => {
    addTicket(dir, 1000);
    writeFileSync(join(dir, '1-dead.json'), JSON.stringify({ ...deadProcess(), acquiredAt: 'x', lingerMs: 0 }));
    expect(liveTickets(dir).map((l) => l.pid)).toEqual([process.pid]);
    expect(existsSync(join(dir, '1-dead.json'))).toBe(false);
  });

  it('keeps the longest linger promised by any release, and drops it only once expired', () => {
    const idle = join(dir, 'idle.json');
    markIdle(idle, 3_600_000);
    markIdle(idle, 0);
    expect(lingerPending(idle)).toBe(true);
    clearExpiredIdle(idle);
    expect(existsSync(idle)).toBe(true);
    writeFileSync(idle, JSON.stringify({ until: Date.now() - 1 }));
    expect(lingerPending(idle)).toBe(false);
    clearExpiredIdle(idle);
    expect(existsSync(idle)).toBe(false);
  });

  it('records kernel ownership and refuses ids that would leave the owners directory', () => {
    expect(recordOwner(dir, '3b2f0c7e-1111-4222-8333-944455556666')).toBe(true);
    expect(recordOwner(dir, '../escape')).toBe(false);
    expect(listOwners(dir).map((r) => [r.kernelId, r.owner.pid])).toEqual([
      ['3b2f0c7e-1111-4222-8333-944455556666', process.pid],
    ]);
    forgetOwner(dir, '3b2f0c7e-1111-4222-8333-944455556666');
    expect(listOwners(dir)).toEqual([]);
  });
});

describe('server command', () => {
  it('keys the state by the interpreter named in the shebang', () => {
    const a = join(dir, 'server-a');
    const b = join(dir, 'server-b');
    // An absolute interpreter: `env node` would resolve through PATH, which need not be the node running the test.
    writeFileSync(a, `#!${process.execPath}\n`);
    writeFileSync(b, '#!/bin/sh\n');
    chmodSync(a, 0o755);
    chmodSync(b, 0o755);
    const ra = resolveServerCommand(a);
    const rb = resolveServerCommand(b);
    expect(ra?.interpreter).toBe(process.execPath);
    expect(rb?.interpreter).not.toBe(ra?.interpreter);
    expect(ra?.key).not.toBe(rb?.key);
    expect(resolveServerCommand(a)?.key).toBe(ra?.key);
    expect(resolveServerCommand(join(dir, 'missing'))).toBeUndefined();
  });

  it("keeps a venv's interpreter link as the shebang names it (the resolved base lacks the venv's packages)", () => {
    const bin = join(dir, 'venv', 'bin');
    mkdirSync(bin, { recursive: true });
    symlinkSync(process.execPath, join(bin, 'python3'));
    const server = join(bin, 'jupyter-server');
    writeFileSync(server, `#!${join(bin, 'python3')}\n`);
    chmodSync(server, 0o755);
    const resolved = resolveServerCommand(server);
    expect(resolved?.interpreter).toBe(join(bin, 'python3'));
    expect(resolved?.interpreter).not.toBe(realpathSync(join(bin, 'python3')));
  });

  it('defaults to the jupyter-server named by KERNELWARDEN_JUPYTER_SERVER', async () => {
    const saved = process.env.KERNELWARDEN_JUPYTER_SERVER;
    process.env.KERNELWARDEN_JUPYTER_SERVER = join(dir, 'no-such-jupyter-server');
    try {
      await expect(LocalGateway.status({ stateDir: join(dir, 'state') })).rejects.toThrow(/no-such-jupyter-server/);
    } finally {
      if (saved === undefined) delete process.env.KERNELWARDEN_JUPYTER_SERVER;
      else process.env.KERNELWARDEN_JUPYTER_SERVER = saved;
    }
  });
});
