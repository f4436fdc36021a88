import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { testGateway } from '@kernelwarden/test-env';
import { afterEach, describe, expect, it } from 'vitest';
import { GatewayBusyError, GatewayClient, GatewayKernel } from './index.js';

/** The package's build, which the child process imports (the guard's entry is beside it). */
const DIST = pathToFileURL(fileURLToPath(new URL('../dist/index.js', import.meta.url))).href;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A proxy in front of the test server whose `POST /api/kernels` is held `holdMs` before it reaches the server (as by
 * a server too busy to take it up) and answered `answerDelayMs` after the server answered. Says when a create arrived
 * and which kernel ids the server's answers named.
 */
async function slowCreateProxy(
  target: string,
  holdMs: number,
  answerDelayMs: number,
): Promise<{
  url: string;
  arrived: Promise<void>;
  created: string[];
  answered: Promise<void>;
  close(): Promise<void>;
}> {
  const created: string[] = [];
  let arrive!: () => void;
  let answer!: () => void;
  const arrived = new Promise<void>((r) => {
    arrive = r;
  });
  const answered = new Promise<void>((r) => {
    answer = r;
  });
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const isCreate = req.method === 'POST' && req.url === '/api/kernels';
      if (isCreate) {
        arrive();
        await sleep(holdMs);
      }
      const forwarded = request(
        new URL(req.url ?? '/', target),
        { method: req.method, headers: { ...req.headers, host: new URL(target).host } },
        (upstream) => {
          const body: Buffer[] = [];
          upstream.on('data', (c: Buffer) => body.push(c));
          upstream.on('end', async () => {
            const text = Buffer.concat(body);
            if (isCreate) {
              try {
                created.push((JSON.parse(text.toString('utf8')) as { id: string }).id);
              } catch {
                // not a kernel model
              }
              answer();
              await sleep(answerDelayMs);
            }
            if (res.destroyed) return;
            res.writeHead(upstream.statusCode ?? 502, { 'content-type': 'application/json' });
            res.end(text);
          });
        },
      );
      forwarded.on('error', () => res.destroy());
      forwarded.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    arrived,
    created,
    answered,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** A Node process that starts a kernel on `baseUrl` with `GatewayKernel.start()` and prints its id once started. */
function startingProcess(baseUrl: string, token: string, kernelName: string, then: 'wait' | 'detach'): ChildProcess {
  const script = `
    import { GatewayKernel } from ${JSON.stringify(DIST)};
    const kernel = await GatewayKernel.start({
      gateway: { baseUrl: process.env.KW_BASE_URL, token: process.env.KW_TOKEN },
      kernelName: process.env.KW_KERNEL,
      startupTimeoutMs: 120000,
    });
    console.log('started ' + kernel.id);
    ${then === 'detach' ? 'kernel.detach();' : 'setInterval(() => {}, 1000);'}
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '', KW_BASE_URL: baseUrl, KW_TOKEN: token, KW_KERNEL: kernelName },
  });
  output.set(child, '');
  const keep = (c: Buffer) => output.set(child, `${output.get(child) ?? ''}${c.toString('utf8')}`);
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return child;
}

/** What each starting process printed (for assertion messages). */
const output = new Map<ChildProcess, string>();

/** Pids of the create guards serving process `pid` (their command line names it). */
function guardsOf(pid: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (args.some((a) => a.endsWith('/create-guard-main.js')) && args.includes(String(pid)))
        found.push(Number(entry));
    } catch {
      // gone
    }
  }
  return found;
}

async function killed(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGKILL');
  await gone;
}

/**
 * Whether `check` comes true within `timeoutMs`. A check that throws counts as not yet: jupyter-server 1.23 answers
 * `GET /api/kernels` with a 500 while a kernel is half-created (`no attribute 'last_activity'`).
 */
async function until(check: () => Promise<boolean> | boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (
      await Promise.resolve()
        .then(check)
        .catch(() => false)
    )
      return true;
    if (Date.now() > deadline) return false;
    await sleep(200);
  }
}

const children: ChildProcess[] = [];
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  await Promise.all(children.splice(0).map(killed));
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('a process that exits while GatewayKernel.start() is creating its kernel, on a stock jupyter-server', () => {
  it('SIGKILLed while its POST /api/kernels is in flight: the kernel created after it died is deleted, and the guard exits', async () => {
    const { baseUrl, token } = testGateway();
    const client = new GatewayClient({ baseUrl, token });
    const proxy = await slowCreateProxy(baseUrl, 1_500, 1_000);
    cleanups.push(() => proxy.close());
    const child = startingProcess(proxy.url, token, 'python3', 'wait');
    children.push(child);
    await proxy.arrived;
    const pid = child.pid as number;
    expect(guardsOf(pid)).toHaveLength(1);
    await killed(child);
    // The server takes the create up only now, with its requester gone, and answers it.
    await proxy.answered;
    expect(proxy.created).toHaveLength(1);
    const id = proxy.created[0] as string;
    cleanups.push(async () => {
      await client.deleteKernel(id).catch(() => {});
    });
    const listed = async () => (await client.listKernels()).some((k) => k.id === id);
    expect(await until(async () => !(await listed()), 30_000), 'the kernel is still listed').toBe(true);
    expect(await until(() => guardsOf(pid).length === 0, 30_000), 'the guard still runs').toBe(true);
  });

  it('SIGKILLed after the create answered, while the kernel is still starting: the kernel is deleted', async () => {
    const { baseUrl, token, root } = testGateway();
    const client = new GatewayClient({ baseUrl, token });
    // A kernelspec whose interpreter starts 8 s late (the server's data dir is the test run's).
    const python = (await client.kernelSpecs()).kernelspecs.python3?.spec;
    expect(python).toBeDefined();
    const name = 'slow-python-exit';
    const dir = join(root, 'gateway', 'data', 'kernels', name);
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, 'kernel.json'),
      JSON.stringify({
        argv: ['sh', '-c', 'sleep 8; exec "$0" "$@"', ...(python?.argv ?? [])],
        display_name: 'slow python',
        language: 'python',
      }),
    );
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const child = startingProcess(baseUrl, token, name, 'wait');
    children.push(child);
    const ours = async () => (await client.listKernels()).filter((k) => k.name === name).map((k) => k.id);
    let ids: string[] = [];
    expect(
      await until(async () => {
        ids = await ours();
        return ids.length > 0;
      }, 30_000),
      `the server never listed the kernel; the process printed: ${output.get(child)}`,
    ).toBe(true);
    cleanups.push(async () => {
      for (const id of ids) await client.deleteKernel(id).catch(() => {});
    });
    const pid = child.pid as number;
    expect(guardsOf(pid)).toHaveLength(1);
    await killed(child);
    expect(await until(async () => (await ours()).length === 0, 30_000), 'the kernel is still listed').toBe(true);
    expect(await until(() => guardsOf(pid).length === 0, 30_000), 'the guard still runs').toBe(true);
  });

  it('a process that ends after its start returned leaves its kernel running (it was the caller’s), and no guard', async () => {
    const { baseUrl, token } = testGateway();
    const client = new GatewayClient({ baseUrl, token });
    // It detaches and has nothing left to do: it ends by itself (the lingering guard does not hold it).
    const child = startingProcess(baseUrl, token, 'python3', 'detach');
    children.push(child);
    const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    expect(code, output.get(child)).toBe(0);
    const id = /started (\S+)/.exec(output.get(child) ?? '')?.[1] as string;
    expect(id).toBeDefined();
    cleanups.push(async () => {
      await client.deleteKernel(id);
    });
    expect(await until(() => guardsOf(child.pid as number).length === 0, 10_000)).toBe(true);
    // Past the guard's exit, the kernel is still there: nothing deleted a kernel whose start succeeded.
    expect((await client.listKernels()).some((k) => k.id === id)).toBe(true);
  });

  it('a start of this process given up on at its deadline, through the guard, deletes the late kernel, and the guard exits after', async () => {
    const { baseUrl, token } = testGateway();
    const client = new GatewayClient({ baseUrl, token });
    const proxy = await slowCreateProxy(baseUrl, 0, 3_000);
    cleanups.push(() => proxy.close());
    const starting = GatewayKernel.start({ gateway: { baseUrl: proxy.url, token }, startupTimeoutMs: 1_000 });
    const error = await starting.catch((e: unknown) => e);
    expect(GatewayBusyError.isInstance(error)).toBe(true);
    // The create went through this process's guard, which is still open for it.
    expect(guardsOf(process.pid)).toHaveLength(1);
    await proxy.answered;
    const id = proxy.created[0] as string;
    expect(id).toBeDefined();
    cleanups.push(async () => {
      await client.deleteKernel(id).catch(() => {});
    });
    expect(
      await until(async () => !(await client.listKernels()).some((k) => k.id === id), 30_000),
      'the kernel is still listed',
    ).toBe(true);
    expect(await until(() => guardsOf(process.pid).length === 0, 30_000), 'the guard still runs').toBe(true);
  });

  it('the guard of this process runs only while a start is open: none is left once the start returned', async () => {
    const { baseUrl, token } = testGateway();
    let returned = false;
    let seen = false;
    const starting = GatewayKernel.start({ gateway: { baseUrl, token } }).finally(() => {
      returned = true;
    });
    while (!returned) {
      if (guardsOf(process.pid).length > 0) seen = true;
      await sleep(20);
    }
    const kernel = await starting;
    try {
      expect(seen, 'no guard ran while the start was open').toBe(true);
      expect(await until(() => guardsOf(process.pid).length === 0, 5_000), 'the guard still runs').toBe(true);
      expect((await kernel.execute('6 * 7')).status).toBe('ok');
    } finally {
      await kernel.shutdown();
    }
  });
});
