import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { identityOf, isProcessAlive, KERNEL_MARKER_ENV, processesCarrying } from '@kernelwarden/core/os';
import { GatewayKernel } from '@kernelwarden/gateway-client';
import { testGateway } from '@kernelwarden/test-env';
import { afterEach, describe, expect, it } from 'vitest';
import { LocalGateway, type LocalGatewayOptions, type LocalGatewayTicket } from './index.js';

/** A directory for this file's state, under the run's root (so the leak teardown sees what we start). */
function freshDir(name: string): string {
  const dir = join(testGateway().root, `fast-start-${name}-${randomBytes(4).toString('hex')}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

async function waitFor<T>(what: string, check: () => T | undefined | false, timeoutMs = 60_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value !== undefined && value !== false) return value as T;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface LaunchersFile {
  mode: string;
  launchers: { python: string; pid: number; state: string; ipykernel?: string; preload: string[] }[];
  kernels: Record<string, { launch: 'fork' | 'exec'; python?: string; ipykernel?: string; reason?: string }>;
}

function launchers(ticket: LocalGatewayTicket): LaunchersFile {
  return JSON.parse(readFileSync(join(ticket.stateDir, 'launchers.json'), 'utf8')) as LaunchersFile;
}

const tickets: LocalGatewayTicket[] = [];
const stateDirs: string[] = [];
afterEach(async () => {
  for (const ticket of tickets.splice(0)) await ticket.release().catch(() => {});
  for (const stateDir of stateDirs.splice(0)) await LocalGateway.stop({ stateDir, stopTimeoutMs: 2_000 });
});

async function acquire(name: string, options: LocalGatewayOptions = {}): Promise<LocalGatewayTicket> {
  const stateDir = freshDir(name);
  stateDirs.push(stateDir);
  const ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0, pool: {}, launcher: 'fork', ...options });
  tickets.push(ticket);
  return ticket;
}

/** What a kernel can see of itself, as one JSON line: the probe every kernel below runs as its first cell. */
const PROBE = `
import json as _j, os as _o, sys as _s, random as _r, uuid as _u, secrets as _x
_ns = sorted(k for k in dir() if not k.startswith('_'))
_fds = []
for _f in _o.listdir('/proc/self/fd'):
    try:
        _t = _o.readlink('/proc/self/fd/' + _f).replace(_o.environ['KERNELWARDEN_KERNEL'].split(':')[1], '<id>')
        _fds.append(_t)
    except OSError:
        pass
print(_j.dumps({
  "ns": _ns,
  "modules": sorted(_s.modules),
  "environ": dict(_o.environ),
  "proc_environ": sorted(e.decode() for e in open('/proc/self/environ', 'rb').read().split(b'\\0') if e),
  "cmdline": open('/proc/self/cmdline', 'rb').read().decode(errors='replace'),
  "pid": _o.getpid(), "cwd": _o.getcwd(), "path": _s.path, "executable": _s.executable,
  "fds": sorted(_fds),
  "random": _r.random(), "uuid": str(_u.uuid4()), "secret": _x.token_hex(8),
}))
`;

interface Probe {
  ns: string[];
  modules: string[];
  environ: Record<string, string>;
  proc_environ: string[];
  cmdline: string;
  pid: number;
  cwd: string;
  path: string[];
  executable: string;
  fds: string[];
  random: number;
  uuid: string;
  secret: string;
}

async function probe(kernel: GatewayKernel): Promise<Probe> {
  const result = await kernel.execute(PROBE);
  expect(result.status).toBe('ok');
  return JSON.parse(result.stdout) as Probe;
}

/** The variables that name one kernel (its marker, ipc dir, session) or were set for one exec, not for the other. */
const PER_KERNEL = ['KERNELWARDEN_KERNEL', 'KERNELWARDEN_KERNEL_IPC_DIR', 'JPY_SESSION_NAME'];

function comparable(environ: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(environ).filter(([k]) => !PER_KERNEL.includes(k)));
}

describe('fast starts: Python kernels forked from a launcher', () => {
  it("gives a forked kernel what an exec'd kernel of the same interpreter has, and two forked kernels their own pid and randomness", async () => {
    const ticket = await acquire('same');
    await using first = await GatewayKernel.start({ gateway: ticket, startupTimeoutMs: 60_000 });
    await using second = await GatewayKernel.start({ gateway: ticket, startupTimeoutMs: 60_000 });
    const a = await probe(first);
    const b = await probe(second);
    const file = launchers(ticket);
    expect(file.kernels[first.id]).toMatchObject({ launch: 'fork', python: a.executable });
    expect(file.kernels[second.id]).toMatchObject({ launch: 'fork' });
    expect(file.launchers).toEqual([
      expect.objectContaining({ python: a.executable, state: 'ready', ipykernel: expect.any(String) }),
    ]);
    const launcherPid = file.launchers[0]!.pid;

    // A cold kernel of the same interpreter on the same server: /usr/bin/env in front of its argv makes it exec'd.
    const spec = join(ticket.kernelSpecDir, 'cold-python');
    mkdirSync(spec, { recursive: true });
    writeFileSync(
      join(spec, 'kernel.json'),
      JSON.stringify({
        argv: ['/usr/bin/env', a.executable, '-m', 'ipykernel_launcher', '-f', '{connection_file}'],
        display_name: 'cold',
        language: 'python',
      }),
    );
    await using cold = await GatewayKernel.start({
      gateway: ticket,
      kernelName: 'cold-python',
      startupTimeoutMs: 60_000,
    });
    const c = await probe(cold);
    expect(launchers(ticket).kernels[cold.id]).toMatchObject({ launch: 'exec' });

    // The code a kernel runs sees the same namespace, modules, environment, cwd and sys.path either way.
    expect(a.ns).toEqual(c.ns);
    expect(a.modules.filter((m) => !c.modules.includes(m))).toEqual([]);
    expect(c.modules.filter((m) => !a.modules.includes(m))).toEqual([]);
    expect(comparable(a.environ)).toEqual(comparable(c.environ));
    expect(a.environ.KERNELWARDEN_KERNEL).toMatch(new RegExp(`:${first.id}$`));
    expect(a.cwd).toBe(c.cwd);
    expect(a.path).toEqual(c.path);
    // ZMQ's sockets and pipes come and go with connections, and IPython's history database opens its directory and
    // journal while it writes: the same kinds, and the other files exactly.
    const files = (p: Probe) => p.fds.filter((f) => f.startsWith('/') && !f.includes('/.ipython/'));
    const kinds = (p: Probe) =>
      [...new Set(p.fds.filter((f) => !f.startsWith('/')).map((f) => f.replace(/\d+/g, 'N')))].sort();
    expect(files(a)).toEqual(files(c));
    expect(kinds(a)).toEqual(kinds(c));
    // Nothing the launcher holds open is open in its kernel.
    const held = readdirSync(`/proc/${launcherPid}/fd`).map((fd) => readlinkSync(`/proc/${launcherPid}/fd/${fd}`));
    expect(a.fds.filter((f) => !f.startsWith('/') && held.includes(f))).toEqual([]);
    // /proc shows the kernel's own environment and command line (the marker, the connection file).
    const launchEnv = (p: Probe) => p.proc_environ.filter((e) => !PER_KERNEL.includes(e.split('=')[0]!));
    expect(launchEnv(a)).toEqual(launchEnv(c));
    expect(a.proc_environ).toContain(`KERNELWARDEN_KERNEL=${a.environ.KERNELWARDEN_KERNEL}`);
    expect(a.cmdline).toContain(`kernel-${first.id}.json`);
    expect(a.cmdline.split('\0')[0]).toBe(a.executable);
    expect(processesCarrying({ name: KERNEL_MARKER_ENV, value: a.environ.KERNELWARDEN_KERNEL })).toEqual([a.pid]);

    // Two forked kernels: their own pids (children of the launcher), their own random state.
    expect(a.pid).not.toBe(b.pid);
    expect(a.pid).not.toBe(launcherPid);
    for (const key of ['random', 'uuid', 'secret'] as const) expect(a[key]).not.toEqual(b[key]);
    expect(readFileSync(`/proc/${a.pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]).toBe(String(launcherPid));

    // gateway status: the launcher (interpreter, pid, memory) and each kernel's interpreter and ipykernel.
    const status = await LocalGateway.status({ stateDir: dirname(ticket.stateDir) });
    expect(status.launcher).toEqual({
      mode: 'fork',
      launchers: [
        expect.objectContaining({
          interpreter: a.executable,
          pid: launcherPid,
          state: 'ready',
          rssBytes: expect.any(Number),
        }),
      ],
    });
    expect(status.launcher!.launchers[0]!.rssBytes).toBeGreaterThan(1024 * 1024);
    const version = status.launcher!.launchers[0]!.ipykernel;
    expect(version).toMatch(/^\d+\.\d+/);
    expect(status.kernels.find((k) => k.id === first.id)).toMatchObject({
      interpreter: a.executable,
      ipykernel: version,
      launch: 'fork',
    });
    expect(status.kernels.find((k) => k.id === cold.id)).toMatchObject({ interpreter: a.executable, launch: 'exec' });
  });

  it("forks a kernelspec of another interpreter (a virtual environment's) from that interpreter's own launcher", async () => {
    const ticket = await acquire('venv');
    const venv = join(dirname(ticket.stateDir), 'venv');
    execFileSync('/usr/bin/python3', ['-m', 'venv', '--without-pip', '--system-site-packages', venv]);
    const python = join(venv, 'bin', 'python');
    const spec = join(ticket.kernelSpecDir, 'kw-py-0123456789abcdef');
    mkdirSync(spec, { recursive: true });
    writeFileSync(
      join(spec, 'kernel.json'),
      JSON.stringify({
        argv: [python, '-m', 'ipykernel_launcher', '-f', '{connection_file}'],
        display_name: 'venv',
        language: 'python',
      }),
    );
    const started: number[] = [];
    for (let i = 0; i < 2; i++) {
      await using kernel = await GatewayKernel.start({
        gateway: ticket,
        kernelName: 'kw-py-0123456789abcdef',
        startupTimeoutMs: 60_000,
      });
      const result = await kernel.execute('import sys, os; print(sys.prefix, sys.executable, os.getppid())');
      expect(result.stdout.trim().split(' ').slice(0, 2)).toEqual([venv, python]);
      started.push(Number(result.stdout.trim().split(' ')[2]));
      expect(launchers(ticket).kernels[kernel.id]).toMatchObject({ launch: 'fork', python });
    }
    const own = launchers(ticket).launchers.find((l) => l.python === python);
    expect(own).toMatchObject({ state: 'ready', ipykernel: expect.any(String) });
    // Both kernels were children of that launcher, which is not the server's own.
    expect(started).toEqual([own!.pid, own!.pid]);
    expect(launchers(ticket).launchers.filter((l) => l.python !== python)).toHaveLength(1);
  });

  it("interrupts, restarts and shuts a forked kernel down as it would an exec'd one, leaving no process behind", async () => {
    const ticket = await acquire('lifecycle');
    const kernel = await GatewayKernel.start({ gateway: ticket, startupTimeoutMs: 60_000 });
    const before = await probe(kernel);
    const running = kernel.execute('import time\ntime.sleep(60)');
    await new Promise((r) => setTimeout(r, 500));
    expect(await kernel.interrupt()).toMatchObject({ delivered: true });
    expect(await running).toMatchObject({
      status: 'error',
      error: expect.objectContaining({ ename: 'KeyboardInterrupt' }),
    });
    await kernel.execute('x = 41');
    await kernel.restart();
    const after = await probe(kernel);
    expect(after.pid).not.toBe(before.pid);
    expect(after.ns).not.toContain('x');
    expect(launchers(ticket).kernels[kernel.id]).toMatchObject({ launch: 'fork' });
    await waitFor('the restarted-away kernel to be gone', () => !isProcessAlive(identityOf(before.pid)));
    await kernel.shutdown();
    await waitFor('the kernel to be gone', () => !isProcessAlive(identityOf(after.pid)));
    await waitFor(
      'no process carrying its marker',
      () => processesCarrying({ name: KERNEL_MARKER_ENV, value: after.environ.KERNELWARDEN_KERNEL }).length === 0,
    );
    await waitFor('its launch record to go', () => launchers(ticket).kernels[kernel.id] === undefined);
  });

  it("replaces a launcher that died: the next start is exec'd with the reason logged, later ones forked again", async () => {
    const ticket = await acquire('replace');
    await using warm = await GatewayKernel.start({ gateway: ticket, startupTimeoutMs: 60_000 });
    const old = launchers(ticket).launchers[0]!;
    expect(old.state).toBe('ready');
    process.kill(old.pid, 'SIGKILL');
    await waitFor(
      'the server to see its launcher die',
      () => launchers(ticket).launchers[0]?.state === 'dead' || undefined,
    );
    await using next = await GatewayKernel.start({ gateway: ticket, startupTimeoutMs: 60_000 });
    expect(await next.execute('print(6 * 7)')).toMatchObject({ status: 'ok', stdout: '42\n' });
    expect(launchers(ticket).kernels[next.id]).toMatchObject({
      launch: 'exec',
      reason: expect.stringContaining('dead'),
    });
    expect(readFileSync(join(ticket.stateDir, 'server.log'), 'utf8')).toMatch(
      /exec'd, not forked: the launcher of .* is dead/,
    );
    const fresh = await waitFor('a new launcher', () => {
      const found = launchers(ticket).launchers.find((l) => l.state === 'ready');
      return found && found.pid !== old.pid ? found : undefined;
    });
    await using third = await GatewayKernel.start({ gateway: ticket, startupTimeoutMs: 60_000 });
    expect(launchers(ticket).kernels[third.id]).toMatchObject({ launch: 'fork' });
    expect((await probe(third)).pid).not.toBe(fresh.pid);
    // The kernel forked by the dead launcher went with it (PDEATHSIG); the server saw it die.
    void warm;
  });

  it('ends a forked kernel that shuts down as the interpreter ends a cold one: threads joined, atexit run, files flushed, objects released', async () => {
    const ticket = await acquire('exit');
    const spec = join(ticket.kernelSpecDir, 'cold-python');
    const out = freshDir('exit-files');
    const forked = await GatewayKernel.start({ gateway: ticket, startupTimeoutMs: 60_000 });
    const python = (await probe(forked)).executable;
    mkdirSync(spec, { recursive: true });
    writeFileSync(
      join(spec, 'kernel.json'),
      JSON.stringify({
        argv: ['/usr/bin/env', python, '-m', 'ipykernel_launcher', '-f', '{connection_file}'],
        display_name: 'cold',
        language: 'python',
      }),
    );
    const cold = await GatewayKernel.start({ gateway: ticket, kernelName: 'cold-python', startupTimeoutMs: 60_000 });
    expect(launchers(ticket).kernels[forked.id]).toMatchObject({ launch: 'fork' });
    expect(launchers(ticket).kernels[cold.id]).toMatchObject({ launch: 'exec' });
    const leftBehind = (tag: string) => `
import atexit, sys, threading, time, types
out = ${JSON.stringify(join(out, tag))}
def late():
    time.sleep(0.3)
    open(out + '-thread', 'w').write('joined')
threading.Thread(target=late).start()
atexit.register(lambda: open(out + '-atexit', 'w').write('ran'))
held = types.ModuleType('kw_left_open')
sys.modules['kw_left_open'] = held
held.handle = open(out + '-open', 'w')
held.handle.write('flushed')
class Released:
    def __init__(self, path):
        self.path = path
    def __del__(self):
        open(self.path, 'w').write('released')
kept = Released(out + '-del')
`;
    const files = (tag: string) =>
      Object.fromEntries(
        readdirSync(out)
          .filter((name) => name.startsWith(`${tag}-`))
          .map((name) => [name.slice(tag.length + 1), readFileSync(join(out, name), 'utf8')]),
      );
    for (const [tag, kernel] of [
      ['forked', forked],
      ['cold', cold],
    ] as const) {
      expect(await kernel.execute(leftBehind(tag))).toMatchObject({ status: 'ok' });
      const marker = { name: KERNEL_MARKER_ENV, value: (await probe(kernel)).environ.KERNELWARDEN_KERNEL! };
      await kernel.shutdown();
      await waitFor(`kernel ${tag} to exit`, () => processesCarrying(marker).length === 0);
    }
    const expected = { thread: 'joined', atexit: 'ran', open: 'flushed', del: 'released' };
    expect(files('cold')).toEqual(expected);
    expect(files('forked')).toEqual(expected);
  });

  it("execs every kernel with launcher 'exec', and forks the preloaded modules' kernels with them imported", async () => {
    const plain = await acquire('exec', { launcher: 'exec' });
    await using cold = await GatewayKernel.start({ gateway: plain, startupTimeoutMs: 60_000 });
    expect(await cold.execute('print(1)')).toMatchObject({ status: 'ok' });
    expect(launchers(plain)).toMatchObject({ mode: 'exec', launchers: [] });
    expect(launchers(plain).kernels[cold.id]).toMatchObject({ launch: 'exec', reason: 'forking is off' });

    const preloaded = await acquire('preload', { launcherPreload: ['xml.dom.minidom'] });
    await using warm = await GatewayKernel.start({ gateway: preloaded, startupTimeoutMs: 60_000 });
    expect((await probe(warm)).modules).toContain('xml.dom.minidom');
    expect(launchers(preloaded).launchers[0]).toMatchObject({ preload: ['xml.dom.minidom'], state: 'ready' });
    expect(launchers(preloaded).kernels[warm.id]).toMatchObject({ launch: 'fork' });
  });
});
