import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  GatewayBusyError,
  GatewayCapacityError,
  GatewayClient,
  GatewayKernel,
  KernelStartError,
} from '@kernelwarden/gateway-client';
import { testGateway } from '@kernelwarden/test-env';
import { afterEach, describe, expect, it } from 'vitest';
import { LocalGateway, type LocalGatewayOptions, type LocalGatewayTicket } from './index.js';

function freshDir(name: string): string {
  const dir = join(testGateway().root, `start-capacity-${name}-${randomBytes(4).toString('hex')}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

const tickets: LocalGatewayTicket[] = [];
const stateDirs: string[] = [];
afterEach(async () => {
  for (const ticket of tickets.splice(0)) await ticket.release().catch(() => {});
  for (const stateDir of stateDirs.splice(0)) await LocalGateway.stop({ stateDir, stopTimeoutMs: 2_000 });
});

async function acquire(
  name: string,
  opts: LocalGatewayOptions,
): Promise<{ ticket: LocalGatewayTicket; client: GatewayClient }> {
  const stateDir = freshDir(name);
  stateDirs.push(stateDir);
  // Kernels exec'd, not forked: a start then holds its slot for the interpreter's whole boot (about a second), long
  // enough for the creates queued behind it to be seen waiting, withdrawn or left.
  const ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0, pool: {}, launcher: 'exec', ...opts });
  tickets.push(ticket);
  return { ticket, client: new GatewayClient(ticket) };
}

/** A child process that starts a kernel through its own ticket and is SIGKILLed as soon as its create is sent. */
async function startAndDie(stateDir: string, ownersDir: string, delayMs: number): Promise<void> {
  const before = new Set(readdirSync(ownersDir));
  const program = `
    const { LocalGateway } = await import(${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)});
    const { GatewayKernel } = await import('@kernelwarden/gateway-client');
    const ticket = await LocalGateway.acquire({ stateDir: ${JSON.stringify(stateDir)}, lingerMs: 0, pool: {} });
    await GatewayKernel.start({ gateway: ticket });
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', program], {
    cwd: new URL('..', import.meta.url).pathname,
    env: process.env,
    stdio: 'ignore',
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  // The create's id is recorded (as the child's) just before the request goes out.
  const until = Date.now() + 30_000;
  while (!readdirSync(ownersDir).some((name) => !before.has(name))) {
    if (Date.now() > until) throw new Error('the child never sent its create');
    await settle(5);
  }
  await settle(delayMs);
  child.kill('SIGKILL');
  await exited;
}

async function kernelIds(client: GatewayClient): Promise<string[]> {
  return (await client.listKernels()).map((k) => k.id).sort();
}

async function settle(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
}

describe('LocalGateway start capacity', () => {
  it('gives a kernel the id its create asked for, and refuses one in use', async () => {
    const { client } = await acquire('id', {});
    const kernelId = randomUUID();
    const model = await client.createKernel({ name: 'python3', kernelId });
    expect(model.id).toBe(kernelId);
    const again = await client.createKernel({ name: 'python3', kernelId }).catch((e: unknown) => e);
    expect(KernelStartError.isInstance(again)).toBe(true);
    expect(again).toMatchObject({ status: 409 });
    expect(await kernelIds(client)).toEqual([kernelId]);
    await client.deleteKernel(kernelId);
  });

  it('records a new kernel idle once it answered, with no client connected to it (exec or fork)', async () => {
    for (const launcher of ['exec', 'fork'] as const) {
      const { client } = await acquire(`idle-${launcher}`, { launcher });
      const created = await client.createKernel({ name: 'python3' });
      try {
        // A WebSocket opened to a kernel the server thinks is starting waits for its state to change.
        let state: string | undefined;
        const until = Date.now() + 10_000;
        do {
          state = (await client.getKernel(created.id))?.execution_state;
          if (state !== 'starting') break;
          await settle(20);
        } while (Date.now() < until);
        expect(state, launcher).toBe('idle');
      } finally {
        await client.deleteKernel(created.id);
      }
    }
  });

  it('past maxKernels a create waits its bound, then fails with GatewayCapacityError and starts nothing', async () => {
    const { client } = await acquire('limit', { maxKernels: 2, maxConcurrentStarts: 2 });
    const first = await client.createKernel({ name: 'python3' });
    const second = await client.createKernel({ name: 'python3' });
    const error = await client.createKernel({ name: 'python3', waitMs: 800 }).catch((e: unknown) => e);
    expect(GatewayCapacityError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ code: 'GATEWAY_CAPACITY', retryable: true, maxKernels: 2, status: 503 });
    expect(await kernelIds(client)).toEqual([first.id, second.id].sort());
    // A kernel going makes room: a waiting create gets its turn.
    const waiting = client.createKernel({ name: 'python3', waitMs: 30_000 });
    await settle(300);
    await client.deleteKernel(first.id);
    const third = await waiting;
    expect(await kernelIds(client)).toEqual([second.id, third.id].sort());
    await Promise.all([client.deleteKernel(second.id), client.deleteKernel(third.id)]);
  });

  it('starts one kernel at a time with maxConcurrentStarts 1: every create of a burst gets its kernel, in turn', async () => {
    const { client } = await acquire('queue', { maxConcurrentStarts: 1 });
    const models = await Promise.all(Array.from({ length: 4 }, () => client.createKernel({ name: 'python3' })));
    expect(new Set(models.map((m) => m.id)).size).toBe(4);
    expect(await kernelIds(client)).toEqual(models.map((m) => m.id).sort());
    await Promise.all(models.map((m) => client.deleteKernel(m.id)));
  });

  it("a create still queued past its wait fails with GatewayBusyError, one withdrawn by a DELETE of its id or by its requester's leaving starts nothing", async () => {
    const { client } = await acquire('withdraw', { maxConcurrentStarts: 1 });
    // Three creates ahead hold the one start slot for a while.
    const ahead = Array.from({ length: 3 }, () => client.createKernel({ name: 'python3' }));
    await settle(50);
    const busy = await client.createKernel({ name: 'python3', waitMs: 100 }).catch((e: unknown) => e);
    expect(GatewayBusyError.isInstance(busy)).toBe(true);
    expect(busy).toMatchObject({ code: 'GATEWAY_BUSY', retryable: true, name: 'TimeoutError' });

    const withdrawnId = randomUUID();
    const withdrawn = client.createKernel({ name: 'python3', kernelId: withdrawnId }).catch((e: unknown) => e);
    await settle(100);
    await expect(client.deleteKernel(withdrawnId)).resolves.toEqual({ status: 204 });
    expect(await withdrawn).toMatchObject({ status: 410 });

    const leftId = randomUUID();
    const controller = new AbortController();
    const left = client.createKernel({ name: 'python3', kernelId: leftId }, { signal: controller.signal });
    await settle(100);
    controller.abort(new Error('requester left'));
    await expect(left).rejects.toThrow('requester left');

    const models = await Promise.all(ahead);
    // Let the queue run dry: nothing more starts.
    await settle(3_000);
    const ids = await kernelIds(client);
    expect(ids).toEqual(models.map((m) => m.id).sort());
    expect(ids).not.toContain(withdrawnId);
    expect(ids).not.toContain(leftId);
    await Promise.all(models.map((m) => client.deleteKernel(m.id)));
  });

  it('a process killed while its create waits in the queue, or while its kernel starts, leaves no kernel', async () => {
    const { ticket, client } = await acquire('exit', { maxConcurrentStarts: 1 });
    const stateDir = stateDirs.at(-1) as string;
    const ownersDir = join(ticket.stateDir, 'owners');
    mkdirSync(ownersDir, { recursive: true });
    // Queued behind two creates: the server drops it when the connection goes.
    const ahead = [client.createKernel({ name: 'python3' }), client.createKernel({ name: 'python3' })];
    await startAndDie(stateDir, ownersDir, 0);
    const kept = await Promise.all(ahead);
    // Killed at several points of its own start (the slot is free): the server shuts the kernel down when the
    // connection is gone, or, had it answered already, the orphan sweep of the next acquire deletes it.
    for (const delayMs of [0, 150, 400]) await startAndDie(stateDir, ownersDir, delayMs);
    await settle(2_000);
    const again = await LocalGateway.acquire({ stateDir, lingerMs: 0, pool: {} });
    tickets.push(again);
    const until = Date.now() + 30_000;
    while ((await kernelIds(client)).length > 2 && Date.now() < until) await settle(200);
    expect(await kernelIds(client)).toEqual(kept.map((m) => m.id).sort());
    await Promise.all(kept.map((m) => client.deleteKernel(m.id)));
  });

  it("a start's wait for its turn in the queue does not count toward its startupTimeoutMs", async () => {
    const { ticket, client } = await acquire('turns', { maxConcurrentStarts: 1 });
    // A kernelspec whose interpreter starts 12 s late holds the one start slot that long.
    const python = (await client.kernelSpecs()).kernelspecs.python3?.spec;
    expect(python).toBeDefined();
    mkdirSync(join(ticket.kernelSpecDir, 'slow-python'), { recursive: true });
    writeFileSync(
      join(ticket.kernelSpecDir, 'slow-python', 'kernel.json'),
      JSON.stringify({
        argv: ['sh', '-c', 'sleep 12; exec "$0" "$@"', ...(python?.argv ?? [])],
        display_name: 'slow python',
        language: 'python',
      }),
    );
    // Its create is answered once the kernel is up (after the 12 s), so it gets a REST deadline past that.
    const slow = client.createKernel({ name: 'slow-python' }, { timeoutMs: 90_000 });
    await settle(300);
    const began = performance.now();
    // Its own deadline leaves an exec'd interpreter's boot room on a loaded machine.
    const kernel = await GatewayKernel.start({ gateway: ticket, startupTimeoutMs: 10_000 });
    try {
      // It waited for the slow kernel's turn (longer than its own deadline), then started within it.
      expect(performance.now() - began).toBeGreaterThan(10_000);
      expect((await kernel.execute('1 + 1')).status).toBe('ok');
    } finally {
      await kernel.shutdown();
      await client.deleteKernel((await slow).id);
    }
    expect(await kernelIds(client)).toEqual([]);
  });

  it('GatewayKernel.start through a ticket at its limit fails typed and leaves nothing', async () => {
    const { ticket, client } = await acquire('start-limit', { maxKernels: 1, startQueueTimeoutMs: 1_500 });
    const kernel = await GatewayKernel.start({ gateway: ticket });
    // The wait for room is the queue's (startQueueTimeoutMs), not the start's own deadline.
    const error = await GatewayKernel.start({ gateway: ticket, startupTimeoutMs: 60_000 }).catch((e: unknown) => e);
    expect(GatewayCapacityError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/limit of 1 kernels/);
    expect(await kernelIds(client)).toEqual([kernel.id]);
    await kernel.shutdown();
  });
});
