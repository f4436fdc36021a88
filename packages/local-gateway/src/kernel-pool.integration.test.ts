import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { KERNEL_MARKER_ENV, processesCarrying } from '@kernelwarden/core/os';
import { GatewayKernel } from '@kernelwarden/gateway-client';
import { processesMentioning, testGateway } from '@kernelwarden/test-env';
import { afterEach, describe, expect, it } from 'vitest';
import { LocalGateway, type LocalGatewayTicket } from './index.js';

/** A directory for this file's state, under the run's root (so the leak teardown sees what we start). */
function freshDir(name: string): string {
  const dir = join(testGateway().root, `kernel-pool-${name}-${randomBytes(4).toString('hex')}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

async function waitFor<T>(what: string, check: () => T | undefined | Promise<T | undefined>, timeoutMs = 60_000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value as T;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The ids of the ready pooled kernels of the gateway under `stateDir`, once there are `count` of them. */
async function pooledKernels(stateDir: string, count: number): Promise<string[]> {
  return waitFor(`${count} pooled kernel(s)`, async () => {
    const status = await LocalGateway.status({ stateDir });
    const ids = status.kernels.filter((k) => k.pooled).map((k) => k.id);
    return ids.length >= count ? ids : undefined;
  });
}

/** Every process of the gateway's server run carrying a kernel marker (its kernels and what they started). */
function markedProcesses(): number[] {
  return processesCarrying({ name: KERNEL_MARKER_ENV });
}

const tickets: LocalGatewayTicket[] = [];
const stateDirs: string[] = [];
afterEach(async () => {
  for (const ticket of tickets.splice(0)) await ticket.release().catch(() => {});
  for (const stateDir of stateDirs.splice(0)) await LocalGateway.stop({ stateDir, stopTimeoutMs: 2_000 });
});

async function acquire(
  name: string,
  pool: Record<string, number>,
): Promise<{ ticket: LocalGatewayTicket; stateDir: string }> {
  const stateDir = freshDir(name);
  stateDirs.push(stateDir);
  const ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0, pool });
  tickets.push(ticket);
  return { ticket, stateDir };
}

/** A child process that claims a kernel through its own ticket at `at` (epoch ms) and prints what it got. */
function claimingChild(stateDir: string, at: number): Promise<{ id: string; pooled: boolean; pid: number }> {
  const program = `
    const { LocalGateway } = await import(${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)});
    const { GatewayKernel } = await import('@kernelwarden/gateway-client');
    const ticket = await LocalGateway.acquire({ stateDir: ${JSON.stringify(stateDir)}, lingerMs: 0, pool: { python3: 2 } });
    const before = new Set((await LocalGateway.status({ stateDir: ${JSON.stringify(stateDir)} })).kernels.filter((k) => k.pooled).map((k) => k.id));
    await new Promise((r) => setTimeout(r, Math.max(0, ${at} - Date.now())));
    const kernel = await GatewayKernel.start({ gateway: ticket });
    const pid = (await kernel.execute('import os; print(os.getpid())')).stdout.trim();
    process.stdout.write(JSON.stringify({ id: kernel.id, pooled: before.has(kernel.id), pid: Number(pid) }) + '\\n');
    await kernel.shutdown();
    await ticket.release();
  `;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', program], {
      cwd: new URL('..', import.meta.url).pathname,
      env: process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    child.on('exit', (code) => {
      if (code === 0) resolve(JSON.parse(out.trim().split('\n').at(-1) ?? '{}'));
      else reject(new Error(`claiming child exited ${code}: ${err.slice(-2000)}`));
    });
  });
}

describe("LocalGateway's warm pool (real jupyter-server)", () => {
  it('hands two processes claiming at the same moment two different pooled kernels', async () => {
    const { stateDir } = await acquire('two-claims', { python3: 2 });
    const pooled = await pooledKernels(stateDir, 2);
    const at = Date.now() + 1_500;
    const [a, b] = await Promise.all([claimingChild(stateDir, at), claimingChild(stateDir, at)]);
    expect(a.id).not.toBe(b.id);
    expect(a.pooled && b.pooled).toBe(true);
    expect(pooled).toEqual(expect.arrayContaining([a.id, b.id]));
    expect(a.pid).not.toBe(b.pid);
  });

  it("applies the claimant's cwd and env to a claimed kernel, which carries nothing of the pool's", async () => {
    const { ticket, stateDir } = await acquire('claim-env', { python3: 1 });
    const [pooled] = await pooledKernels(stateDir, 1);
    const cwd = realpathSync(freshDir('claim-cwd'));
    const kernel = await GatewayKernel.start({ gateway: ticket, cwd, env: { KW_POOL_PROBE: 'claimed' } });
    // A kernel created cold on the same server, without the pool: what a claimed kernel must look like.
    const cold = await GatewayKernel.start({ gateway: { baseUrl: ticket.baseUrl, token: ticket.token } });
    const namespace = "print(sorted(n for n in dir() if not n.startswith('_')), len(In))";
    try {
      expect(kernel.id).toBe(pooled);
      const probe = await kernel.execute("import os; print(os.getcwd()); print(os.environ.get('KW_POOL_PROBE'))");
      expect(probe.stdout).toBe(`${cwd}\nclaimed\n`);
      expect(probe.executionCount).toBe(1);
      await cold.execute('import os');
      expect((await kernel.execute(namespace)).stdout).toBe((await cold.execute(namespace)).stdout);
      const status = await LocalGateway.status({ stateDir });
      expect(status.kernels.find((k) => k.id === kernel.id)).toMatchObject({ ownerPid: process.pid, ownerAlive: true });
      expect(status.kernels.find((k) => k.id === kernel.id)?.pooled).toBeUndefined();
    } finally {
      await kernel.shutdown();
      await cold.shutdown();
    }
  });

  it('refills the pool in the background after a claim, with a new kernel', async () => {
    const { ticket, stateDir } = await acquire('refill', { python3: 1 });
    const [first] = await pooledKernels(stateDir, 1);
    const kernel = await GatewayKernel.start({ gateway: ticket });
    try {
      expect(kernel.id).toBe(first);
      const [next] = await pooledKernels(stateDir, 1);
      expect(next).not.toBe(first);
      expect((await LocalGateway.status({ stateDir })).pool).toEqual({ python3: { wanted: 1, ready: 1 } });
    } finally {
      await kernel.shutdown();
    }
  });

  it('starts no kernel with a pool of 0, and empties the pool when a later acquire asks for 0', async () => {
    const { ticket, stateDir } = await acquire('off', { python3: 1 });
    const [pooled] = await pooledKernels(stateDir, 1);
    const second = await LocalGateway.acquire({ stateDir, lingerMs: 0, pool: { python3: 0 } });
    tickets.push(second);
    await waitFor('the pooled kernel to be deleted', async () => {
      const status = await LocalGateway.status({ stateDir });
      return status.kernels.every((k) => k.id !== pooled) || undefined;
    });
    const kernel = await GatewayKernel.start({ gateway: ticket });
    try {
      expect(kernel.id).not.toBe(pooled);
      expect((await LocalGateway.status({ stateDir })).kernels.map((k) => k.id)).toEqual([kernel.id]);
    } finally {
      await kernel.shutdown();
    }
  });

  it("stops the pool's kernels with the server", async () => {
    const { stateDir } = await acquire('stop', { python3: 1 });
    await pooledKernels(stateDir, 1);
    const gatewayDir = (await LocalGateway.status({ stateDir })).stateDir;
    expect(processesMentioning(gatewayDir).length).toBeGreaterThan(1);
    await LocalGateway.stop({ stateDir, stopTimeoutMs: 5_000 });
    await waitFor('no process of the gateway left', () => processesMentioning(gatewayDir).length === 0 || undefined);
    expect(markedProcesses().filter((pid) => processesMentioning(gatewayDir).some((p) => p.pid === pid))).toEqual([]);
  });

  it("reaps the pool's kernels when the server is killed (SIGKILL)", async () => {
    const { ticket, stateDir } = await acquire('killed', { python3: 1 });
    await pooledKernels(stateDir, 1);
    const gatewayDir = (await LocalGateway.status({ stateDir })).stateDir;
    const kernelsBefore = processesMentioning(join(gatewayDir, 'runtime')).filter((p) => /ipykernel/.test(p.cmdline));
    expect(kernelsBefore.length).toBeGreaterThan(0);
    process.kill(ticket.pid, 'SIGKILL');
    await waitFor('the pooled kernel processes to be reaped', () =>
      kernelsBefore.every((p) => !processesMentioning(gatewayDir).some((q) => q.pid === p.pid)) ? true : undefined,
    );
    await waitFor('the pool to be cleared', async () => {
      const status = await LocalGateway.status({ stateDir });
      return (!status.running && Object.values(status.pool).every((p) => p.ready === 0)) || undefined;
    });
  });
});
