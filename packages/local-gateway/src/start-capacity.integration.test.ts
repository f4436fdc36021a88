import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
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
import { LocalGateway, type LocalGatewayLease, type LocalGatewayOptions } from './index.js';

function freshDir(name: string): string {
  const dir = join(testGateway().root, `start-capacity-${name}-${randomBytes(4).toString('hex')}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

const leases: LocalGatewayLease[] = [];
const stateDirs: string[] = [];
afterEach(async () => {
  for (const lease of leases.splice(0)) await lease.release().catch(() => {});
  for (const stateDir of stateDirs.splice(0)) await LocalGateway.stop({ stateDir, stopTimeoutMs: 2_000 });
});

async function acquire(
  name: string,
  opts: LocalGatewayOptions,
): Promise<{ lease: LocalGatewayLease; client: GatewayClient }> {
  const stateDir = freshDir(name);
  stateDirs.push(stateDir);
  const lease = await LocalGateway.acquire({ stateDir, lingerMs: 0, pool: {}, ...opts });
  leases.push(lease);
  return { lease, client: new GatewayClient(lease) };
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

  it('GatewayKernel.start through a lease at its limit fails typed and leaves nothing', async () => {
    const { lease, client } = await acquire('start-limit', { maxKernels: 1 });
    const kernel = await GatewayKernel.start({ gateway: lease });
    const error = await GatewayKernel.start({ gateway: lease, startupTimeoutMs: 1_500 }).catch((e: unknown) => e);
    expect(GatewayCapacityError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/limit of 1 kernels/);
    expect(await kernelIds(client)).toEqual([kernel.id]);
    await kernel.shutdown();
  });
});
