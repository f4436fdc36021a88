import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inspect } from 'node:util';
import { identityOf, isProcessAlive, socketInodes } from '@kernelwarden/core/os';
import { GatewayKernel, GatewayUnavailableError } from '@kernelwarden/gateway-client';
import { kernelPids, processesMentioning, testGateway } from '@kernelwarden/test-env';
import { build } from 'tsup';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LocalGateway, type LocalGatewayEvent } from './index.js';

const here = dirname(fileURLToPath(import.meta.url));

/** A directory for this file's state, under the run's root (so the leak teardown sees what we start). */
function freshDir(name: string): string {
  const dir = join(testGateway().root, `local-gateway-${name}-${randomBytes(4).toString('hex')}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The gateway directory `acquire` uses below a base state dir (there is one per interpreter). */
function gatewayDirs(stateDir: string): string[] {
  return readdirSync(stateDir)
    .filter((n) => n.startsWith('gateway-'))
    .map((n) => join(stateDir, n));
}

/** Processes (other than zombies) whose command line mentions `dir`. */
function liveProcessesMentioning(dir: string): { pid: number; cmdline: string }[] {
  return processesMentioning(dir).filter((p) => isProcessAlive(identityOf(p.pid)));
}

async function listKernelIds(ticket: { baseUrl: string; token: string }): Promise<string[]> {
  const res = await fetch(`${ticket.baseUrl}/api/kernels`, { headers: { Authorization: `token ${ticket.token}` } });
  expect(res.status).toBe(200);
  return ((await res.json()) as { id: string }[]).map((k) => k.id);
}

let bundle: string;
let childScript: string;

/** A Node child running `child.mjs`: it imports the built module, acquires, prints one JSON line. */
interface Child {
  proc: ChildProcess;
  line: Promise<{ baseUrl: string; pid: number; reused: boolean; kernelId?: string }>;
  exit: Promise<number | null>;
}

function startChild(mode: 'hold' | 'kernel', stateDir: string, lingerMs: number): Child {
  const proc = spawn(process.execPath, [childScript, mode, stateDir, String(lingerMs)], {
    env: { ...process.env, LG_BUNDLE: bundle },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const exit = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  const line = new Promise<{ baseUrl: string; pid: number; reused: boolean; kernelId?: string }>((res, rej) => {
    proc.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl >= 0) res(JSON.parse(out.slice(0, nl)));
    });
    void exit.then((code) => rej(new Error(`child exited (${code}) before answering: ${err}`)));
  });
  return { proc, line, exit };
}

const children: Child[] = [];

beforeAll(async () => {
  // The children import the built module (bundled with its dependencies), as another program would, from a copy of
  // the package's layout: the bundle in dist/, the Python package the server loads in python/ beside it.
  const pkg = freshDir('bundle');
  const out = join(pkg, 'dist');
  cpSync(resolve(here, '../python/kernelwarden_gateway'), join(pkg, 'python', 'kernelwarden_gateway'), {
    recursive: true,
    filter: (source) => !source.includes('__pycache__'),
  });
  await build({
    // The watcher entry sits beside the bundle, where the library looks for it (as in the package's dist).
    entry: { 'local-gateway': join(here, 'index.ts'), 'linger-watcher-main': join(here, 'linger-watcher-main.ts') },
    outDir: out,
    format: ['esm'],
    platform: 'node',
    target: 'node20',
    noExternal: [/.*/],
    // `ws` is CommonJS and requires Node's built-ins: give the ESM bundle a require().
    banner: {
      js: "import { createRequire as __kwRequire } from 'node:module'; const require = __kwRequire(import.meta.url);",
    },
    dts: false,
    sourcemap: false,
    splitting: false,
    silent: true,
    config: false,
    tsconfig: resolve(here, '../tsconfig.build.json'),
  });
  bundle = join(out, 'local-gateway.js');
  childScript = join(out, 'child.mjs');
  writeFileSync(
    childScript,
    `const { LocalGateway } = await import(process.env.LG_BUNDLE);
const [mode, stateDir, linger] = process.argv.slice(2);
const ticket = await LocalGateway.acquire({ stateDir, lingerMs: Number(linger) });
let kernelId;
if (mode === 'kernel') {
  const res = await fetch(ticket.baseUrl + '/api/kernels', {
    method: 'POST',
    headers: { Authorization: 'token ' + ticket.token, 'Content-Type': 'application/json' },
    body: '{"name":"python3"}',
  });
  kernelId = (await res.json()).id;
  ticket.ownership.created(kernelId);
}
process.stdout.write(JSON.stringify({ baseUrl: ticket.baseUrl, pid: ticket.pid, reused: ticket.reused, kernelId }) + '\\n');
await new Promise((r) => { process.stdin.on('data', () => {}); process.stdin.once('end', r); });
await ticket.release();
`,
  );
});

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.proc.exitCode === null && child.proc.signalCode === null) child.proc.kill('SIGKILL');
    await child.exit;
  }
});

describe('LocalGateway on a real jupyter-server (one shared server)', () => {
  let stateDir: string;

  beforeAll(() => {
    stateDir = freshDir('shared');
  });

  afterAll(async () => {
    await LocalGateway.stop({ stateDir });
    await waitFor('no process left mentioning the state dir', () => liveProcessesMentioning(stateDir).length === 0);
  });

  it('gives two Node processes acquiring at once one server, which stop() then stops', async () => {
    const a = startChild('hold', stateDir, 60_000);
    const b = startChild('hold', stateDir, 60_000);
    children.push(a, b);
    const [la, lb] = await Promise.all([a.line, b.line]);
    expect(la.baseUrl).toBe(lb.baseUrl);
    expect(la.pid).toBe(lb.pid);
    expect([la.reused, lb.reused].sort()).toEqual([false, true]);
    expect(la.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const status = await LocalGateway.status({ stateDir });
    expect(status.running).toBe(true);
    expect(status.pid).toBe(la.pid);
    expect(status.holders.map((h) => h.pid).sort()).toEqual([a.proc.pid, b.proc.pid].sort());
    a.proc.stdin?.end();
    b.proc.stdin?.end();
    expect(await a.exit).toBe(0);
    expect(await b.exit).toBe(0);
    const after = await LocalGateway.status({ stateDir });
    expect(after.holders).toEqual([]);
    expect(after.running).toBe(true); // lingering

    expect(await LocalGateway.stop({ stateDir })).toEqual({ stopped: true, pid: la.pid });
    expect(isProcessAlive(identityOf(la.pid))).toBe(false);
    await waitFor('no process left mentioning the state dir', () => liveProcessesMentioning(stateDir).length === 0);
    expect((await LocalGateway.status({ stateDir })).running).toBe(false);
  });

  it('answers 403 to a request without the token, keeps the info file 0600, and never shows the token', async () => {
    const events: LocalGatewayEvent[] = [];
    const ticket = await LocalGateway.acquire({ stateDir, onEvent: (e) => events.push(e) });
    try {
      expect((await fetch(`${ticket.baseUrl}/api/kernels`)).status).toBe(403);
      const wrong = await fetch(`${ticket.baseUrl}/api/kernels`, { headers: { Authorization: 'token nope' } });
      expect(wrong.status).toBe(403);
      expect(await listKernelIds(ticket)).toEqual([]);

      const info = join(ticket.stateDir, 'server.json');
      expect(statSync(info).mode & 0o777).toBe(0o600);
      // The server's listening sockets, recorded for later processes to check cheaply: ones the server holds.
      const { listeners } = JSON.parse(readFileSync(info, 'utf8')) as { listeners?: string[] };
      expect(listeners?.length).toBeGreaterThan(0);
      const held = socketInodes(ticket.pid);
      for (const inode of listeners ?? []) expect(held.has(inode)).toBe(true);
      expect(statSync(ticket.stateDir).mode & 0o777).toBe(0o700);
      for (const name of readdirSync(ticket.stateDir)) {
        const st = statSync(join(ticket.stateDir, name));
        expect(st.mode & 0o077, name).toBe(0);
      }

      const { token } = ticket;
      expect(token.length).toBeGreaterThanOrEqual(32);
      const status = await LocalGateway.status({ stateDir });
      const mentioning = processesMentioning(ticket.stateDir);
      expect(mentioning.some((p) => p.pid === ticket.pid)).toBe(true); // the server names its state dir
      const places: [string, string][] = [
        ['server command line', readFileSync(`/proc/${ticket.pid}/cmdline`, 'utf8')],
        ['server environment', readFileSync(`/proc/${ticket.pid}/environ`, 'utf8')],
        ['command lines of every process of the gateway', JSON.stringify(mentioning)],
        ['server log', readFileSync(join(ticket.stateDir, 'server.log'), 'utf8')],
        ['linger watcher log', readFileSync(join(ticket.stateDir, 'linger-watcher.log'), 'utf8')],
        ['events', JSON.stringify(events)],
        ['JSON of the ticket', JSON.stringify(ticket)],
        ['inspect of the ticket', inspect(ticket)],
        ['status', JSON.stringify(status)],
      ];
      for (const [where, text] of places) expect(text.includes(token), where).toBe(false);
      expect(existsSync(join(ticket.stateDir, 'token'))).toBe(false);
      expect(events.map((e) => e.type)).toContain(ticket.reused ? 'server-reused' : 'server-ready');
    } finally {
      await ticket.release();
    }
  });

  it('launches a kernelspec written into kernelSpecDir by name at once, and replaces a dead watcher, which prunes old kernel logs', async () => {
    const ticket = await LocalGateway.acquire({ stateDir });
    try {
      const spec = join(ticket.kernelSpecDir, 'kw-written');
      mkdirSync(spec, { recursive: true });
      writeFileSync(
        join(spec, 'kernel.json'),
        JSON.stringify({
          argv: ['/usr/bin/python3', '-m', 'ipykernel_launcher', '-f', '{connection_file}'],
          display_name: 'written by a test',
          language: 'python',
        }),
      );
      const headers = { Authorization: `token ${ticket.token}`, 'Content-Type': 'application/json' };
      const specs = (await (await fetch(`${ticket.baseUrl}/api/kernelspecs`, { headers })).json()) as {
        kernelspecs: Record<string, unknown>;
      };
      expect(Object.keys(specs.kernelspecs)).toContain('kw-written');
      const created = await fetch(`${ticket.baseUrl}/api/kernels`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ name: 'kw-written' }),
      });
      expect(created.status).toBe(201);
      const { id } = (await created.json()) as { id: string };
      const deleted = await fetch(`${ticket.baseUrl}/api/kernels/${id}`, { method: 'DELETE', headers });
      expect(deleted.status).toBe(204);

      const info = () => JSON.parse(readFileSync(join(ticket.stateDir, 'server.json'), 'utf8'));
      const watcher = identityOf(info().watcher.pid);
      process.kill(watcher.pid, 'SIGKILL');
      await waitFor('the watcher to die', () => !isProcessAlive(watcher));
      // Kernel logs: one not written for two hours, one just written. The new watcher's first look prunes the old.
      const oldLog = join(ticket.stateDir, 'kernel-logs', 'gone-two-hours.log');
      const freshLog = join(ticket.stateDir, 'kernel-logs', 'written-now.log');
      writeFileSync(oldLog, 'old\n');
      writeFileSync(freshLog, 'fresh\n');
      const twoHoursAgo = new Date(Date.now() - 2 * 3_600_000);
      utimesSync(oldLog, twoHoursAgo, twoHoursAgo);
      const again = await LocalGateway.acquire({ stateDir });
      await again.release();
      expect(again.pid).toBe(ticket.pid);
      expect(info().watcher.pid).not.toBe(watcher.pid);
      expect(isProcessAlive(info().watcher)).toBe(true);
      await waitFor('the new watcher to prune the old kernel log', () => !existsSync(oldLog));
      expect(existsSync(freshLog)).toBe(true);
      rmSync(freshLog);
    } finally {
      await ticket.release();
    }
  });

  it('takes over a stale lock left by a killed owner', async () => {
    const dir = (await LocalGateway.status({ stateDir })).stateDir;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const victim = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    await waitFor('the victim to start', () => victim.pid !== undefined && isProcessAlive(identityOf(victim.pid)));
    const owner = identityOf(victim.pid!);
    victim.kill('SIGKILL');
    await new Promise((r) => victim.once('exit', r));
    writeFileSync(join(dir, 'lock'), JSON.stringify({ ...owner, acquiredAt: new Date().toISOString() }), {
      mode: 0o600,
    });

    const events: LocalGatewayEvent[] = [];
    const ticket = await LocalGateway.acquire({ stateDir, startupTimeoutMs: 20_000, onEvent: (e) => events.push(e) });
    try {
      expect(events).toContainEqual({ type: 'lock-takeover', previousOwnerPid: owner.pid });
      expect(existsSync(join(dir, 'lock'))).toBe(false); // released after use
    } finally {
      await ticket.release();
    }
  });

  it('deletes, on the next acquire, a kernel whose creating process was SIGKILLed', async () => {
    const child = startChild('kernel', stateDir, 60_000);
    children.push(child);
    const { kernelId } = await child.line;
    expect(kernelId).toBeTruthy();
    await waitFor('the kernel process', () => kernelPids(kernelId!).length > 0);
    const dir = (await LocalGateway.status({ stateDir })).stateDir;
    expect(existsSync(join(dir, 'owners', kernelId!))).toBe(true);
    child.proc.kill('SIGKILL');
    await child.exit;

    const events: LocalGatewayEvent[] = [];
    const ticket = await LocalGateway.acquire({ stateDir, onEvent: (e) => events.push(e) });
    try {
      expect(events).toContainEqual({ type: 'kernel-reaped', kernelId, ownerPid: child.proc.pid });
      expect(await listKernelIds(ticket)).not.toContain(kernelId);
      expect(existsSync(join(dir, 'owners', kernelId!))).toBe(false);
      await waitFor('the kernel process to exit', () => kernelPids(kernelId!).length === 0, 15_000);
    } finally {
      await ticket.release();
    }
  });

  it('serves GatewayKernel through a ticket: ownership is recorded, and all of a 20 MB cell arrives', async () => {
    const ticket = await LocalGateway.acquire({ stateDir });
    const kernel = await GatewayKernel.start({ gateway: ticket, startupTimeoutMs: 60_000 }).catch(
      async (e: unknown) => {
        await ticket.release();
        throw e;
      },
    );
    try {
      expect(existsSync(join(ticket.stateDir, 'owners', kernel.id))).toBe(true);
      let chars = 0;
      let lines = 0;
      const result = await kernel.execute("for i in range(200000): print('x'*99)", {
        onOutput: (o) => {
          if (o.type === 'stream' && o.name === 'stdout') {
            chars += o.text.length;
            for (let i = o.text.indexOf('\n'); i >= 0; i = o.text.indexOf('\n', i + 1)) lines++;
          }
        },
      });
      expect(result.status).toBe('ok');
      expect(result.outputDropped ?? false).toBe(false);
      expect(lines).toBe(200_000);
      expect(chars).toBe(200_000 * 100);
    } finally {
      const shutdown = await kernel.shutdown();
      await ticket.release();
      expect(shutdown).toEqual({ confirmed: true });
    }
    expect(existsSync(join(ticket.stateDir, 'owners', kernel.id))).toBe(false);
  });

  it('puts the log tail of a server that dies at start-up in the error, with the token masked', async () => {
    const fakeDir = freshDir('fake-server');
    const fake = join(fakeDir, 'jupyter-server');
    const leaked = join(fakeDir, 'leaked-token');
    writeFileSync(
      fake,
      `#!/bin/sh\ncp "$JUPYTER_TOKEN_FILE" "${leaked}"\necho "token is $(cat "$JUPYTER_TOKEN_FILE")"\nexit 3\n`,
    );
    chmodSync(fake, 0o755);
    const events: LocalGatewayEvent[] = [];
    const error = await LocalGateway.acquire({ stateDir, command: fake, onEvent: (e) => events.push(e) }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(GatewayUnavailableError.isInstance(error)).toBe(true);
    const message = (error as Error).message;
    expect(message).toMatch(/exited during start-up \(exit code 3\)/);
    expect(message).toContain('token is <token>');
    const token = readFileSync(leaked, 'utf8');
    expect(token.length).toBeGreaterThanOrEqual(32);
    expect(message.includes(token)).toBe(false);
    expect(inspect(error).includes(token)).toBe(false);
    expect(JSON.stringify(events).includes(token)).toBe(false);
  });
});

describe('LocalGateway and a system-wide jupyter config that fights the token', () => {
  it('refuses a server that answers without the token, one that refuses its own token, and one that did not run its own configuration, stopping each', async () => {
    const stateDir = freshDir('config-fight');
    const configDir = freshDir('config-path');
    const configFile = join(configDir, 'jupyter_server_config.py');
    const saved = process.env.JUPYTER_CONFIG_PATH;
    process.env.JUPYTER_CONFIG_PATH = configDir;
    try {
      writeFileSync(configFile, "c.ServerApp.token = ''\nc.ServerApp.password = ''\n");
      const open = await LocalGateway.acquire({ stateDir }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((open as { code?: string }).code).toBe('LOCAL_GATEWAY_INSECURE');
      expect(liveProcessesMentioning(stateDir)).toEqual([]);

      writeFileSync(configFile, "c.ServerApp.token = 'someone-elses-token'\n");
      const refused = await LocalGateway.acquire({ stateDir }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((refused as { code?: string }).code).toBe('LOCAL_GATEWAY_TOKEN_REFUSED');
      expect(liveProcessesMentioning(stateDir)).toEqual([]);

      // A server that does not run LocalGateway's own configuration (here `--config` names another file in its
      // place) would launch kernels on TCP, logging into the server's log: such a server is refused too.
      writeFileSync(configFile, '');
      const otherConfig = join(configDir, 'other_config.py');
      writeFileSync(otherConfig, '');
      const unconfigured = await LocalGateway.acquire({ stateDir, serverArgs: [`--config=${otherConfig}`] }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((unconfigured as { code?: string }).code, String(unconfigured)).toBe('LOCAL_GATEWAY_CONFIG');
      expect(liveProcessesMentioning(stateDir)).toEqual([]);
    } finally {
      if (saved === undefined) delete process.env.JUPYTER_CONFIG_PATH;
      else process.env.JUPYTER_CONFIG_PATH = saved;
      await LocalGateway.stop({ stateDir });
    }
  });
});

describe('LocalGateway lifetime', () => {
  const dirs: string[] = [];
  afterEach(async () => {
    for (const stateDir of dirs.splice(0)) {
      await LocalGateway.stop({ stateDir });
      await waitFor('no process left mentioning the state dir', () => liveProcessesMentioning(stateDir).length === 0);
    }
  });

  it('rejects with the signal reason when aborted during start-up, and leaves no server behind', async () => {
    const stateDir = freshDir('abort');
    dirs.push(stateDir);
    const controller = new AbortController();
    const reason = new Error('caller gave up');
    const error = await LocalGateway.acquire({
      stateDir,
      signal: controller.signal,
      onEvent: (e) => {
        if (e.type === 'server-starting') setTimeout(() => controller.abort(reason), 200);
      },
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBe(reason);
    expect(liveProcessesMentioning(stateDir)).toEqual([]);
    const [dir] = gatewayDirs(stateDir);
    expect(existsSync(join(dir!, 'lock'))).toBe(false);
    expect(existsSync(join(dir!, 'server.json'))).toBe(false);
    expect(existsSync(join(dir!, 'token'))).toBe(false);
  });

  it('stops the server at the last release when lingerMs is 0', async () => {
    const stateDir = freshDir('linger0');
    dirs.push(stateDir);
    const extra = freshDir('extra-jupyter-path');
    mkdirSync(join(extra, 'kernels', 'kw-extra'), { recursive: true });
    writeFileSync(
      join(extra, 'kernels', 'kw-extra', 'kernel.json'),
      JSON.stringify({ argv: ['/bin/false', '{connection_file}'], display_name: 'extra', language: 'python' }),
    );
    const first = await LocalGateway.acquire({ stateDir, lingerMs: 0, jupyterPath: [extra] });
    const specs = await fetch(`${first.baseUrl}/api/kernelspecs`, {
      headers: { Authorization: `token ${first.token}` },
    });
    expect(Object.keys(((await specs.json()) as { kernelspecs: object }).kernelspecs)).toContain('kw-extra');
    const second = await LocalGateway.acquire({ stateDir, lingerMs: 0 });
    const server = identityOf(first.pid);
    await first.release();
    expect(isProcessAlive(server)).toBe(true); // still held by `second`
    await second.release();
    expect(isProcessAlive(server)).toBe(false);
    expect(existsSync(join(first.stateDir, 'server.json'))).toBe(false);
    await waitFor('the watcher to exit too', () => liveProcessesMentioning(stateDir).length === 0);
    expect((await LocalGateway.status({ stateDir })).running).toBe(false);
  });

  it('stops the server after the linger once its only holder was SIGKILLed without releasing', async () => {
    const stateDir = freshDir('linger-killed');
    dirs.push(stateDir);
    const child = startChild('hold', stateDir, 300);
    children.push(child);
    const { pid } = await child.line;
    const server = identityOf(pid);
    child.proc.kill('SIGKILL');
    await child.exit;
    await waitFor('the watcher to stop the lingering server', () => !isProcessAlive(server), 60_000);
    await waitFor('no process left mentioning the state dir', () => liveProcessesMentioning(stateDir).length === 0);
    const [dir] = gatewayDirs(stateDir);
    expect(existsSync(join(dir!, 'server.json'))).toBe(false);
    expect(await LocalGateway.stop({ stateDir })).toEqual({ stopped: false });
  });
});

describe("LocalGateway's server options", () => {
  it("are all known to the running jupyter-server's version: its log has no 'not recognized' or 'deprecated' line", async () => {
    const stateDir = freshDir('options');
    const ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0 });
    try {
      // A kernel's channels socket makes the server configure its websocket connection (the iopub limits) too.
      await using kernel = await GatewayKernel.start({ gateway: ticket, startupTimeoutMs: 60_000 });
      expect(await kernel.execute('print(1)')).toMatchObject({ status: 'ok', stdout: '1\n' });
    } finally {
      await ticket.release();
    }
    const log = readFileSync(join(ticket.stateDir, 'server.log'), 'utf8');
    expect(log).toMatch(/Jupyter Server \d+\.\d+\.\d+ is running at/);
    expect(log.split('\n').filter((line) => /not recognized|deprecated/i.test(line))).toEqual([]);
  });
});
