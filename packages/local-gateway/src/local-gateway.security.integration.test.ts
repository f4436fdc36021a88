import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { identityOf, isProcessAlive, socketInodes, tcpListeners } from '@kernelwarden/core/os';
import { GatewayClient, GatewayKernel, GatewayUnavailableError } from '@kernelwarden/gateway-client';
import { createOtherUser, type OtherUser, testGateway } from '@kernelwarden/test-env';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LocalGateway, type LocalGatewayTicket } from './index.js';

/** A directory under the run's root, so the leak teardown sees what the tests start. */
function freshDir(name: string): string {
  const dir = join(testGateway().root, `lg-sec-${name}-${randomBytes(3).toString('hex')}`);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dir;
}

async function waitFor(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Reads a child's stdout until a line matching `pattern` arrives. */
function lineMatching(child: ChildProcess, pattern: RegExp, timeoutMs = 20_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`no line matching ${pattern} in: ${out}`)), timeoutMs);
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => pattern.test(l));
      if (line !== undefined) {
        clearTimeout(timer);
        resolve(line);
      }
    });
  });
}

function gatewayDir(stateDir: string): string {
  const name = readdirSync(stateDir).find((n) => n.startsWith('gateway-'));
  if (!name) throw new Error(`no gateway directory in ${stateDir}`);
  return join(stateDir, name);
}

async function text(kernel: GatewayKernel, code: string): Promise<string> {
  const result = await kernel.execute(code, { timeoutMs: 30_000 });
  expect(result.status, JSON.stringify(result.outputs)).toBe('ok');
  return result.outputs.map((o) => (o.type === 'stream' ? o.text : '')).join('');
}

/**
 * Takes every port a jupyter-server whose command line mentions `marker` is about to listen on (it is visible in
 * `ps`), answers any request with 200 and writes what it received to `log`.
 */
const PORT_THIEF = String.raw`
import os, socket, sys, threading, time
marker, log_path = sys.argv[1].encode(), sys.argv[2]
only = int(sys.argv[3]) if len(sys.argv) > 3 else 0
taken = set()

def serve(srv):
    while True:
        try:
            conn, _ = srv.accept()
        except OSError:
            return
        conn.settimeout(2)
        try:
            data = conn.recv(65536)
        except OSError:
            data = b""
        with open(log_path, "ab") as f:
            f.write(data + b"\n---\n")
        try:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        except OSError:
            pass
        conn.close()

def take(port, tries=1):
    if port in taken:
        return
    for attempt in range(tries):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            s.listen(16)
            break
        except OSError:
            s.close()
            time.sleep(0.05)
    else:
        return
    taken.add(port)
    print("took", port, flush=True)
    threading.Thread(target=serve, args=(s,), daemon=True).start()

if only:
    take(only, tries=200)
print("ready", flush=True)
end = time.time() + 90
while time.time() < end:
    if not only:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                args = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
            except OSError:
                continue
            if not any(marker in a for a in args):
                continue
            for a in args:
                if a.startswith(b"--port="):
                    try:
                        take(int(a[7:]))
                    except ValueError:
                        pass
    time.sleep(0.002)
`;

/** Subscribes to a kernel's iopub for `seconds` and reports how many messages it read and whether one held SECRET. */
const IOPUB_LISTENER = String.raw`
import json, sys, time, zmq
url, seconds, secret = sys.argv[1], float(sys.argv[2]), sys.argv[3].encode()
ctx = zmq.Context()
sub = ctx.socket(zmq.SUB)
sub.setsockopt(zmq.SUBSCRIBE, b"")
sub.setsockopt(zmq.LINGER, 0)
sub.connect(url)
print("ready", flush=True)
end, count, saw = time.time() + seconds, 0, False
while time.time() < end:
    if sub.poll(100):
        frames = sub.recv_multipart()
        count += 1
        saw = saw or any(secret in f for f in frames)
print(json.dumps({"messages": count, "secret": saw}), flush=True)
`;

/** Connects a PUSH socket to each target and sends a message with a wrong pipe id; reports what happened. */
const PIPE_INJECTOR = `
import json, sys, zmq
ctx = zmq.Context()
out = {}
for target in sys.argv[1:]:
    sock = ctx.socket(zmq.PUSH)
    sock.linger = 1000
    sock.setsockopt(zmq.SNDTIMEO, 2000)
    try:
        sock.connect(target)
        sock.send_multipart([b"0" * 16, b"kw-injected-by-another-user"])
        out[target] = "sent"
    except zmq.ZMQError as error:
        out[target] = str(error)
    finally:
        sock.close()
ctx.term()
print(json.dumps(out), flush=True)
`;

/** The loopback TCP ports process `pid` listens on. */
function tcpListenPorts(pid: number): number[] {
  const held = socketInodes(pid);
  return (tcpListeners(4) ?? []).filter((l) => l.address === '127.0.0.1' && held.has(l.inode)).map((l) => l.port);
}

describe('LocalGateway against another local user', () => {
  let other: OtherUser;

  beforeAll(() => {
    other = createOtherUser();
  });
  afterAll(async () => {
    await other[Symbol.asyncDispose]();
  });

  it('never sends a request to a process of another user that took its port first, and refuses to start', async () => {
    const stateDir = freshDir('thief');
    const rootDir = freshDir('thief-root');
    const log = other.file('thief.log', '', 0o666);
    const thief = other.spawn(['/usr/bin/python3', other.file('thief.py', PORT_THIEF), rootDir, log]);
    try {
      await lineMatching(thief, /^ready/);
      const error = await LocalGateway.acquire({ stateDir, rootDir, startupTimeoutMs: 60_000 }).then(
        async (ticket) => {
          await ticket.release();
          return undefined;
        },
        (e: unknown) => e,
      );
      expect(readFileSync(log, 'utf8')).toBe('');
      expect(GatewayUnavailableError.isInstance(error), String(error)).toBe(true);
      expect((error as Error).message).toMatch(/another process took its port/);
    } finally {
      thief.kill('SIGKILL');
      await LocalGateway.stop({ stateDir });
    }
  });

  it('sends nothing to a process that takes the port of a server that died, and starts a new one', async () => {
    const stateDir = freshDir('died');
    const ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0 });
    const log = other.file('died.log', '', 0o666);
    let thief: ChildProcess | undefined;
    try {
      process.kill(-ticket.pid, 'SIGKILL');
      await waitFor('the server to exit', () => !isProcessAlive(identityOf(ticket.pid)));
      const port = Number(new URL(ticket.baseUrl).port);
      thief = other.spawn(['/usr/bin/python3', other.file('died.py', PORT_THIEF), 'unused-marker', log, String(port)]);
      await lineMatching(thief, /^took/);
      const listing = await new GatewayClient(ticket).listKernels().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(GatewayUnavailableError.isInstance(listing), String(listing)).toBe(true);
      await expect(GatewayKernel.start({ gateway: ticket, startupTimeoutMs: 10_000 })).rejects.toThrow();
      const fresh = await LocalGateway.acquire({ stateDir, lingerMs: 0 });
      try {
        expect(fresh.reused).toBe(false);
        expect(fresh.baseUrl).not.toBe(ticket.baseUrl);
        expect(await new GatewayClient(fresh).listKernels()).toEqual([]);
      } finally {
        await fresh.release();
      }
      expect(readFileSync(log, 'utf8')).toBe('');
    } finally {
      thief?.kill('SIGKILL');
      await ticket.release().catch(() => undefined);
      await LocalGateway.stop({ stateDir });
    }
  });

  it("keeps every kernel's channels out of another user's reach: no TCP listener, iopub unreadable", async () => {
    const stateDir = freshDir('iopub');
    const ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0 });
    const kernel = await GatewayKernel.start({ gateway: ticket });
    let listener: ChildProcess | undefined;
    try {
      const connection = JSON.parse(
        readFileSync(join(gatewayDir(stateDir), 'runtime', `kernel-${kernel.id}.json`), 'utf8'),
      ) as { transport: string; ip: string; iopub_port: number };
      const url =
        connection.transport === 'ipc'
          ? `ipc://${connection.ip}-${connection.iopub_port}`
          : `tcp://${connection.ip}:${connection.iopub_port}`;
      listener = other.spawn(['/usr/bin/python3', other.file('iopub.py', IOPUB_LISTENER), url, '4', 'kw-iopub-SECRET']);
      const report = lineMatching(listener, /^\{/, 30_000);
      await lineMatching(listener, /^ready/);
      await new Promise((r) => setTimeout(r, 500));
      for (let i = 0; i < 5; i++) await text(kernel, "print('kw-iopub-' + 'SECRET')");
      const seen = JSON.parse(await report) as { messages: number; secret: boolean };
      expect(seen).toEqual({ messages: 0, secret: false });

      // None of the kernel's channels is a TCP port, nor is ipykernel's own fork-output pipe.
      expect(connection.transport).toBe('ipc');
      const pid = Number(await text(kernel, 'import os; print(os.getpid())'));
      expect(tcpListenPorts(pid)).toEqual([]);
    } finally {
      listener?.kill('SIGKILL');
      await kernel.shutdown();
      await ticket.release();
    }
  });
  it("keeps ipykernel's fork-output pipe out of another user's reach: nothing they send reaches a running cell, and a forked child's output still does", async () => {
    const stateDir = freshDir('fork-pipe');
    const ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0 });
    const kernel = await GatewayKernel.start({ gateway: ticket });
    try {
      const pid = Number(await text(kernel, 'import os; print(os.getpid())'));
      const connection = JSON.parse(
        readFileSync(join(gatewayDir(stateDir), 'runtime', `kernel-${kernel.id}.json`), 'utf8'),
      ) as { ip: string };
      const ipcDir = dirname(connection.ip);
      const ports = tcpListenPorts(pid);
      const targets = [
        ...ports.map((port) => `tcp://127.0.0.1:${port}`),
        ...readdirSync(ipcDir).map((name) => `ipc://${join(ipcDir, name)}`),
      ];
      const running = kernel.execute('import time; time.sleep(3); print("cell done")', { timeoutMs: 60_000 });
      await new Promise((r) => setTimeout(r, 800));
      const sent = await other.run(['/usr/bin/python3', other.file('inject.py', PIPE_INJECTOR), ...targets]);
      expect(sent.code, sent.stderr).toBe(0);
      const result = await running;
      expect(result.stdout).toBe('cell done\n');
      expect(`${result.stdout}${result.stderr}`).not.toContain('kw-injected');
      expect(`${result.stdout}${result.stderr}`).not.toContain('Bad pipe message');
      // The kernel listens on no TCP port at all: the fork pipe is an ipc socket in the kernel's own 0700 directory.
      expect(ports).toEqual([]);
      expect(statSync(ipcDir).mode & 0o077).toBe(0);

      // A forked child's output still reaches the cell, through that pipe.
      const forked = await kernel.execute(
        [
          'import os, sys, time',
          'child = os.fork()',
          'if child == 0:',
          '    print("from the forked child", flush=True)',
          '    sys.stdout.flush()',
          '    os._exit(0)',
          'os.waitpid(child, 0)',
          'time.sleep(0.5)',
          'print("parent done")',
        ].join('\n'),
        { timeoutMs: 60_000 },
      );
      expect(forked.status, forked.stderr).toBe('ok');
      expect(forked.stdout).toContain('from the forked child\n');
      expect(forked.stdout).toContain('parent done\n');
    } finally {
      await kernel.shutdown();
      await ticket.release();
    }
  });

  it('refuses a state directory reached through a link in a directory of another user, before anything is started or read', async () => {
    const theirs = join(other.shared, `dir-${randomBytes(3).toString('hex')}`);
    mkdirSync(theirs, { mode: 0o755 });
    chownSync(theirs, other.uid, -1);
    const ours = freshDir('link-target');
    const linked = await other.run(['ln', '-s', ours, join(theirs, 'st')]);
    expect(linked.code, linked.stderr).toBe(0);
    expect(realpathSync(join(theirs, 'st'))).toBe(ours);
    const error = await LocalGateway.acquire({ stateDir: join(theirs, 'st'), lingerMs: 0 }).then(
      async (ticket) => {
        await ticket.release();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect((error as { code?: string }).code, String(error)).toBe('LOCAL_GATEWAY_STATE_DIR');
    expect((error as Error).message).toContain(`belongs to uid ${other.uid}`);
    // Nothing was made or started: the directory the link points to is as it was.
    expect(readdirSync(ours)).toEqual([]);
    const status = await LocalGateway.status({ stateDir: join(theirs, 'st') }).catch((e: unknown) => e);
    expect((status as { code?: string }).code).toBe('LOCAL_GATEWAY_STATE_DIR');
    await expect(LocalGateway.stop({ stateDir: join(theirs, 'st') })).rejects.toMatchObject({
      code: 'LOCAL_GATEWAY_STATE_DIR',
    });
  });
});

describe('LocalGateway kernels: environment, logs and descendants', () => {
  let stateDir: string;
  let ticket: LocalGatewayTicket;
  const started: GatewayKernel[] = [];

  beforeAll(async () => {
    stateDir = freshDir('kernels');
    // The process that starts the server has secrets in its environment; kernels must never see them.
    const saved = { ...process.env };
    process.env.AWS_SECRET_ACCESS_KEY = 'kw-starter-aws-secret';
    process.env.KERNELWARDEN_GATEWAY_TOKEN = 'kw-starter-gateway-token';
    process.env.JUPYTER_TOKEN = 'kw-starter-jupyter-token';
    try {
      ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0 });
    } finally {
      for (const name of ['AWS_SECRET_ACCESS_KEY', 'KERNELWARDEN_GATEWAY_TOKEN', 'JUPYTER_TOKEN']) {
        if (saved[name] === undefined) delete process.env[name];
        else process.env[name] = saved[name];
      }
    }
  });
  afterEach(async () => {
    for (const kernel of started.splice(0)) await kernel.shutdown();
  });
  afterAll(async () => {
    await ticket.release();
    await LocalGateway.stop({ stateDir });
  });

  async function start(kernelName = 'python3', env?: Record<string, string>): Promise<GatewayKernel> {
    const kernel = await GatewayKernel.start({ gateway: ticket, kernelName, ...(env ? { env } : {}) });
    started.push(kernel);
    return kernel;
  }

  it("gives a kernel the variables its own process asks for, never the gateway starter's secrets or a token", async () => {
    const python = await start('python3', { KW_MINE: 'mine' });
    const pyEnv = JSON.parse(await text(python, 'import os, json; print(json.dumps(dict(os.environ)))')) as Record<
      string,
      string
    >;
    expect(pyEnv.KW_MINE).toBe('mine');
    const leaked = JSON.stringify(pyEnv);
    expect(leaked).not.toContain('kw-starter-');
    expect(leaked).not.toContain(ticket.token);
    expect(Object.keys(pyEnv)).not.toContain('KERNELWARDEN_GATEWAY_TOKEN');
    expect(Object.keys(pyEnv)).not.toContain('JUPYTER_TOKEN');
    // The process's own initial environment (what a subprocess of it would inherit) is just as clean.
    const initial = await text(python, "print(open('/proc/self/environ').read())");
    expect(initial).not.toContain('kw-starter-');
    expect(initial).not.toContain(ticket.token);

    const r = await start('ir', { KW_MINE: 'mine-r' });
    const rEnv = await text(r, 'e <- Sys.getenv(); cat(paste(names(e), e, sep = "=", collapse = "\\n"))');
    expect(rEnv).toContain('KW_MINE=mine-r');
    expect(rEnv).not.toContain('kw-starter-');
    expect(rEnv).not.toContain(ticket.token);
  });

  it("writes a kernel's stdout and stderr to a log of its own: it cannot reach or forge the server's log", async () => {
    const kernel = await start();
    const forged = `[I 2026-01-01 00:00:00.000 ServerApp] kw-forged-${randomBytes(3).toString('hex')}`;
    const said = await kernel.execute(`import os; os.write(2, b${JSON.stringify(`${forged}\n`)}); print(os.getpid())`);
    const pid = Number(said.stdout.trim());
    const serverLog = join(gatewayDir(stateDir), 'server.log');
    const kernelLog = join(gatewayDir(stateDir), 'kernel-logs', `${kernel.id}.log`);
    // Whatever the kernel holds open (ipykernel keeps a copy of its original stdout and stderr), the server's log
    // is not among it.
    const files = readdirSync(`/proc/${pid}/fd`).map((fd) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        return '';
      }
    });
    expect(files).not.toContain(serverLog);
    expect(files).toContain(kernelLog);
    await waitFor('the forged line in the kernel log', () => readFileSync(kernelLog, 'utf8').includes(forged));
    expect(readFileSync(serverLog, 'utf8')).not.toContain('kw-forged-');
    expect(statSync(kernelLog).mode & 0o777).toBe(0o600);
  });

  it('launches IPython kernels whose iopub never drops output: an unbounded send high-water mark', async () => {
    const kernel = await start();
    const said = await text(
      kernel,
      [
        'import sys, zmq',
        'from ipykernel.kernelapp import IPKernelApp',
        'print(IPKernelApp.instance().iopub_thread.socket.getsockopt(zmq.SNDHWM))',
        "print(sys.argv[0].endswith('ipykernel_launcher.py'))",
      ].join('\n'),
    );
    expect(said.trim().split('\n')).toEqual(['0', 'True']);
  });

  it('leaves no process a kernel started, in a process group of its own or not, once the kernel is shut down', async () => {
    const kernel = await start();
    const pids = (
      await text(
        kernel,
        [
          'import subprocess',
          "a = subprocess.Popen(['sleep', '300'], start_new_session=True)",
          "b = subprocess.Popen(['sh', '-c', 'setsid sleep 301 & echo $!'], stdout=subprocess.PIPE, text=True)",
          'print(a.pid); print(b.stdout.readline().strip())',
        ].join('\n'),
      )
    )
      .trim()
      .split('\n')
      .map(Number);
    const ids = pids.map(identityOf);
    expect(ids.every(isProcessAlive)).toBe(true);
    await kernel.shutdown();
    await waitFor('the descendants to be gone', () => !ids.some(isProcessAlive));
  });

  it('kills what a kernel started when the kernel dies and the server restarts it', async () => {
    const kernel = await start();
    const [kernelPid, childPid] = (
      await text(
        kernel,
        "import os, subprocess; c = subprocess.Popen(['sleep', '300'], start_new_session=True); print(os.getpid()); print(c.pid)",
      )
    )
      .trim()
      .split('\n')
      .map(Number) as [number, number];
    const child = identityOf(childPid);
    process.kill(kernelPid, 'SIGKILL');
    await waitFor('the orphan to be gone', () => !isProcessAlive(child));
    const after = await kernel.execute('1 + 1', { timeoutMs: 30_000 });
    expect(after.status).not.toBe('error');
  });
});

describe('LocalGateway state on disk', () => {
  it('refuses a state directory below a directory other users can write to', async () => {
    const open = freshDir('open-parent');
    chmodSync(open, 0o777);
    const error = await LocalGateway.acquire({ stateDir: join(open, 'state') }).then(
      async (ticket) => {
        await ticket.release();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect((error as { code?: string }).code, String(error)).toBe('LOCAL_GATEWAY_STATE_DIR');
    expect((error as Error).message).toMatch(/writable by other users/);
  });

  it('refuses a state directory other users can write to, sticky or not: they could plant its gateway directory', async () => {
    const shared = freshDir('sticky');
    chmodSync(shared, 0o1777);
    const error = await LocalGateway.acquire({ stateDir: shared }).then(
      async (ticket) => {
        await ticket.release();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect((error as { code?: string }).code, String(error)).toBe('LOCAL_GATEWAY_STATE_DIR');
    expect((error as Error).message).toMatch(/writable by other users \(mode 1777\)/);
    expect(readdirSync(shared)).toEqual([]);
  });

  it('follows a link of its own to the state directory once, and uses only the canonical path after', async () => {
    const canonical = freshDir('canonical');
    const link = join(freshDir('links'), 'state');
    symlinkSync(canonical, link);
    const ticket = await LocalGateway.acquire({ stateDir: link, lingerMs: 0 });
    try {
      expect(ticket.stateDir).toBe(gatewayDir(canonical));
      expect(ticket.kernelSpecDir.startsWith(`${canonical}/`)).toBe(true);
      // The server's own paths (command line, environment, working directory) name the canonical directory only.
      const cmdline = readFileSync(`/proc/${ticket.pid}/cmdline`, 'utf8');
      const environ = readFileSync(`/proc/${ticket.pid}/environ`, 'utf8');
      expect(cmdline).toContain(canonical);
      expect(`${cmdline}${environ}`).not.toContain(link);
      expect(readlinkSync(`/proc/${ticket.pid}/cwd`)).toBe(gatewayDir(canonical));
    } finally {
      await ticket.release();
      await LocalGateway.stop({ stateDir: canonical });
    }
  });

  it('trusts no forged server.json: sends it nothing, signals no recorded pid, starts its own server', async () => {
    const stateDir = freshDir('forged');
    const first = await LocalGateway.acquire({ stateDir, lingerMs: 0 });
    await first.release();
    const dir = gatewayDir(stateDir);
    expect(existsSync(join(dir, 'server.json'))).toBe(false);

    const requests: string[] = [];
    const fake = createServer((req, res) => {
      requests.push(`${req.method} ${req.url} ${req.headers.authorization ?? ''}`);
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('[]');
    });
    await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
    const port = (fake.address() as AddressInfo).port;
    const victim = spawn('sleep', ['300'], { detached: true, stdio: 'ignore' });
    const victimId = identityOf(victim.pid ?? -1);
    try {
      const forged = {
        version: 1,
        baseUrl: `http://127.0.0.1:${port}`,
        port,
        token: 'forged-token',
        server: victimId,
        command: '/usr/bin/jupyter-server',
        interpreter: '/usr/bin/python3',
        startedAt: new Date().toISOString(),
        lingerMs: 0,
      };
      writeFileSync(join(dir, 'server.json'), JSON.stringify(forged), { mode: 0o600 });
      const ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0 });
      expect(ticket.baseUrl).not.toBe(forged.baseUrl);
      await ticket.release();
      writeFileSync(join(dir, 'server.json'), JSON.stringify(forged), { mode: 0o600 });
      await LocalGateway.stop({ stateDir, stopTimeoutMs: 0 });
      expect(requests).toEqual([]);
      expect(isProcessAlive(victimId)).toBe(true);
    } finally {
      victim.kill('SIGKILL');
      await new Promise<void>((r) => fake.close(() => r()));
      await LocalGateway.stop({ stateDir });
    }
  });

  it('keeps kernels on ipc whatever a system-wide config says about their transport', async () => {
    const stateDir = freshDir('tcp-config');
    const configDir = freshDir('tcp-config-path');
    writeFileSync(join(configDir, 'jupyter_server_config.py'), "c.KernelManager.transport = 'tcp'\n");
    const saved = process.env.JUPYTER_CONFIG_PATH;
    process.env.JUPYTER_CONFIG_PATH = configDir;
    let ticket: LocalGatewayTicket | undefined;
    try {
      ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0 });
    } finally {
      if (saved === undefined) delete process.env.JUPYTER_CONFIG_PATH;
      else process.env.JUPYTER_CONFIG_PATH = saved;
    }
    const kernel = await GatewayKernel.start({ gateway: ticket });
    try {
      const connection = JSON.parse(
        readFileSync(join(gatewayDir(stateDir), 'runtime', `kernel-${kernel.id}.json`), 'utf8'),
      ) as { transport: string };
      expect(connection.transport).toBe('ipc');
      expect(await text(kernel, 'print(6 * 7)')).toBe('42\n');
    } finally {
      await kernel.shutdown();
      await ticket.release();
    }
  });

  it('keeps the token in files only this user can read', async () => {
    const stateDir = freshDir('token-files');
    const ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0 });
    try {
      const holders: string[] = [];
      const walk = (dir: string) => {
        for (const name of readdirSync(dir)) {
          const path = join(dir, name);
          const st = lstatSync(path);
          if (st.isDirectory()) walk(path);
          else if (st.isFile() && readFileSync(path, 'utf8').includes(ticket.token)) holders.push(path);
        }
      };
      walk(stateDir);
      expect(holders.length).toBeGreaterThan(0);
      for (const path of holders) {
        expect(statSync(path).mode & 0o077, path).toBe(0);
        for (let dir = join(path, '..'); dir.startsWith(gatewayDir(stateDir)); dir = join(dir, '..')) {
          expect(statSync(dir).mode & 0o077, dir).toBe(0);
        }
      }
    } finally {
      await ticket.release();
    }
  });
});

describe('LocalGateway kernels launched in a workspace that holds hostile files', () => {
  let stateDir: string;
  let ticket: LocalGatewayTicket;

  beforeAll(async () => {
    stateDir = freshDir('workspace-launch');
    ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0 });
  });
  afterAll(async () => {
    await ticket.release();
    await LocalGateway.stop({ stateDir });
  });

  /** A kernel of `kernelName` launched with `workspace` as its working directory (the server's `path`). */
  async function launchIn(kernelName: string, workspace: string): Promise<GatewayKernel> {
    const model = await new GatewayClient(ticket).createKernel({ name: kernelName, path: workspace.slice(1) });
    return GatewayKernel.connect({ gateway: ticket, kernelId: model.id, startupTimeoutMs: 60_000 });
  }

  it('imports nothing from the working directory while an IPython kernel starts; its cells still import from it', async () => {
    const workspace = freshDir('ws-python');
    const marker = join(freshDir('ws-python-marker'), 'ran');
    // A zmq.py that records its import and hands over the real zmq, as an attacker's would.
    writeFileSync(
      join(workspace, 'zmq.py'),
      [
        'import os, sys',
        `open(${JSON.stringify(marker)}, "a").write("zmq.py ran\\n")`,
        'here = os.path.dirname(os.path.abspath(__file__))',
        'sys.path[:] = [p for p in sys.path if p not in ("", ".", here)]',
        'del sys.modules["zmq"]',
        'import zmq as _real',
        'sys.modules["zmq"] = _real',
      ].join('\n'),
    );
    writeFileSync(join(workspace, 'kwhelper.py'), 'VALUE = 42\n');
    const kernel = await launchIn('python3', workspace);
    try {
      const said = await text(
        kernel,
        [
          'import os, subprocess, sys',
          'import kwhelper',
          'print(os.getcwd())',
          'print(kwhelper.VALUE)',
          'print("" in sys.path, os.environ.get("PYTHONSAFEPATH"))',
          'print(subprocess.run([sys.executable, "-c", "import sys; print(sys.flags.safe_path)"], capture_output=True, text=True).stdout.strip())',
        ].join('\n'),
      );
      expect(said.trim().split('\n')).toEqual([workspace, '42', 'True None', 'False']);
      expect(existsSync(marker)).toBe(false);
    } finally {
      await kernel.shutdown();
    }
  });

  it("starts every R kernel without the working directory's .Rprofile, .Renviron and .RData", async () => {
    const workspace = freshDir('ws-r');
    const marker = join(freshDir('ws-r-marker'), 'ran');
    writeFileSync(
      join(workspace, '.Rprofile'),
      `cat("Rprofile ran\\n", file = ${JSON.stringify(marker)}, append = TRUE)\n`,
    );
    writeFileSync(join(workspace, '.Renviron'), 'KW_FROM_RENVIRON=set\n');
    execFileSync(
      'R',
      [
        '--vanilla',
        '--slave',
        '-e',
        `.First <- function() cat("First ran\\n", file = ${JSON.stringify(marker)}, append = TRUE); save.image(".RData")`,
      ],
      { cwd: workspace, stdio: 'ignore' },
    );
    expect(existsSync(join(workspace, '.RData'))).toBe(true);
    const kernel = await launchIn('ir', workspace);
    try {
      const said = await text(kernel, 'cat(getwd(), Sys.getenv("KW_FROM_RENVIRON"), exists(".First"), sep = "\\n")');
      expect(said.trim().split('\n')).toEqual([workspace, '', 'FALSE']);
      expect(existsSync(marker)).toBe(false);
    } finally {
      await kernel.shutdown();
    }
  });
});
