import { randomUUID } from 'node:crypto';
import { userInfo } from 'node:os';
import { InvalidOptionsError } from '@kernelwarden/core';
import { FakeGateway } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { GatewayBusyError, GatewayCapacityError, KernelEnvError } from './errors.js';
import { GatewayClient } from './gateway-client.js';
import { GatewayKernel } from './gateway-kernel.js';
import { DEFAULT_REMOTE_STARTUP_TIMEOUT_MS, resolveGatewayKernelOptions } from './gateway-kernel-options.js';
import { isUuidV4 } from './launch-env.js';

type CreateBody = { kernel_id?: string; env?: Record<string, string> };

const creates = (gw: FakeGateway) => gw.requests.filter((r) => r.route === 'create');
const createBody = (gw: FakeGateway, i = 0) => creates(gw)[i]?.body as CreateBody;

async function until(check: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('Enterprise Gateway conventions', () => {
  it('every create sends KERNEL_USERNAME (the OS user) and a fresh UUID v4 KERNEL_ID equal to kernel_id, which EG makes the kernel id', async () => {
    await using gw = await FakeGateway.start({ flavor: 'enterprise-gateway' });
    const client = new GatewayClient({ baseUrl: gw.baseUrl, token: gw.token, flavor: 'enterprise-gateway' });
    const first = await client.createKernel({ name: 'python3' });
    const second = await client.createKernel({ name: 'python3' });
    const [a, b] = [createBody(gw, 0), createBody(gw, 1)];
    expect(isUuidV4(a.env?.KERNEL_ID)).toBe(true);
    expect(a.env?.KERNEL_ID).toBe(a.kernel_id);
    expect(a.env?.KERNEL_ID).not.toBe(b.env?.KERNEL_ID);
    expect(a.env?.KERNEL_USERNAME).toBe(userInfo().username);
    expect(first.id).toBe(a.env?.KERNEL_ID);
    expect(second.id).toBe(b.env?.KERNEL_ID);
    expect(gw.kernel(first.id).launchEnv.KERNEL_USERNAME).toBe(userInfo().username);
  });

  it('sends the same id on a server that ignores it, and the caller or client can name the user', async () => {
    await using gw = await FakeGateway.start();
    const client = new GatewayClient({ baseUrl: gw.baseUrl, token: gw.token, kernelUsername: 'ada' });
    await client.createKernel({ name: 'python3' });
    await client.createKernel({ name: 'python3', env: { KERNEL_USERNAME: 'grace' } });
    expect(createBody(gw, 0).env?.KERNEL_USERNAME).toBe('ada');
    expect(createBody(gw, 1).env?.KERNEL_USERNAME).toBe('grace');
    expect(isUuidV4(createBody(gw, 0).kernel_id)).toBe(true);
    expect(createBody(gw, 0).env?.KERNEL_ID).toBe(createBody(gw, 0).kernel_id);
  });

  it.each([
    ['a value over 4,096 characters', 'x'.repeat(4097)],
    ['a $', 'a$b'],
    ['a backtick', 'a`b'],
    ['a CR', 'a\rb'],
    ['a LF', 'a\nb'],
    ['a NUL', 'a\0b'],
  ])('refuses %s in a create env with KernelEnvError naming the variable, sending nothing', async (_, value) => {
    await using gw = await FakeGateway.start({ flavor: 'enterprise-gateway' });
    const client = new GatewayClient({ baseUrl: gw.baseUrl, token: gw.token });
    const error = await client
      .createKernel({ name: 'python3', env: { KERNEL_SECRET_TOKEN: value } })
      .catch((e: unknown) => e);
    expect(KernelEnvError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ code: 'KERNEL_ENV', variable: '"KERNEL_SECRET_TOKEN"', retryable: false });
    expect((error as Error).message).toContain('KERNEL_SECRET_TOKEN');
    if (value.length < 10) expect((error as Error).message).not.toContain(value);
    expect(creates(gw)).toHaveLength(0);
    // The same rule for a start's launchEnv, before anything is sent.
    const started = await GatewayKernel.start({
      gateway: client,
      launchEnv: { KERNEL_SECRET_TOKEN: value },
    }).catch((e: unknown) => e);
    expect(KernelEnvError.isInstance(started)).toBe(true);
    expect(creates(gw)).toHaveLength(0);
  });

  it('refuses a caller id that is not a UUID v4, a KERNEL_ID other than the id, and a bad kernelUsername, before sending', async () => {
    await using gw = await FakeGateway.start({ flavor: 'enterprise-gateway' });
    const client = new GatewayClient({ baseUrl: gw.baseUrl, token: gw.token });
    await expect(client.createKernel({ name: 'python3', kernelId: 'kernel-1' })).rejects.toMatchObject({
      code: 'INVALID_KERNEL_ID',
    });
    const id = randomUUID();
    await expect(
      client.createKernel({ name: 'python3', kernelId: id, env: { KERNEL_ID: randomUUID() } }),
    ).rejects.toMatchObject({ code: 'KERNEL_ENV', variable: '"KERNEL_ID"' });
    expect(creates(gw)).toHaveLength(0);
    // A caller's env.KERNEL_ID (a UUID v4) is the create's id.
    const model = await client.createKernel({ name: 'python3', env: { KERNEL_ID: id } });
    expect(model.id).toBe(id);
    expect(createBody(gw).kernel_id).toBe(id);
    let error: unknown;
    try {
      new GatewayClient({ baseUrl: gw.baseUrl, kernelUsername: 'ada$(id)' });
    } catch (e) {
      error = e;
    }
    expect(InvalidOptionsError.isInstance(error)).toBe(true);
    expect((error as InvalidOptionsError).path).toBe('kernelUsername');
  });

  it('accepts a value of exactly 4,096 characters', async () => {
    await using gw = await FakeGateway.start({ flavor: 'enterprise-gateway' });
    const client = new GatewayClient({ baseUrl: gw.baseUrl, token: gw.token });
    const model = await client.createKernel({ name: 'python3', env: { KERNEL_BIG: 'x'.repeat(4096) } });
    expect(gw.kernel(model.id).launchEnv.KERNEL_BIG).toHaveLength(4096);
  });

  it("refuses a start's launchEnv that sets KERNEL_ID or KERNEL_LAUNCH_TIMEOUT, naming the field", () => {
    for (const name of ['KERNEL_ID', 'KERNEL_LAUNCH_TIMEOUT']) {
      let error: unknown;
      try {
        resolveGatewayKernelOptions({ gateway: { baseUrl: 'http://127.0.0.1:1' }, launchEnv: { [name]: '1' } });
      } catch (e) {
        error = e;
      }
      expect(InvalidOptionsError.isInstance(error)).toBe(true);
      expect((error as InvalidOptionsError).path).toBe('launchEnv');
      expect((error as Error).message).toContain(name);
    }
  });

  it('starts on an Enterprise Gateway with the remote default deadline and KERNEL_LAUNCH_TIMEOUT just inside it', async () => {
    expect(DEFAULT_REMOTE_STARTUP_TIMEOUT_MS).toBe(300_000);
    await using gw = await FakeGateway.start({ flavor: 'enterprise-gateway', launchDelayMs: 200, clientEnvs: ['TZ'] });
    const gateway = new GatewayClient({ baseUrl: gw.baseUrl, token: gw.token, flavor: 'enterprise-gateway' });
    expect(resolveGatewayKernelOptions({ gateway }).startupTimeoutMs).toBe(DEFAULT_REMOTE_STARTUP_TIMEOUT_MS);
    await using kernel = await GatewayKernel.start({
      gateway,
      launchEnv: { KERNEL_NAMESPACE: 'team-a', TZ: 'UTC', OTHER: 'dropped' },
    });
    const body = createBody(gw);
    const launchTimeout = Number(body.env?.KERNEL_LAUNCH_TIMEOUT);
    // What the deadline leaves once connecting is provided for (5 s): 295 s, give or take the time to get there.
    expect(launchTimeout).toBeGreaterThanOrEqual(294);
    expect(launchTimeout).toBeLessThanOrEqual(295);
    expect(kernel.id).toBe(body.env?.KERNEL_ID);
    expect(gw.kernel(kernel.id).launchEnv).toMatchObject({ KERNEL_NAMESPACE: 'team-a', TZ: 'UTC' });
    expect(gw.kernel(kernel.id).launchEnv).not.toHaveProperty('OTHER');
    expect((await kernel.execute('print(1)')).status).toBe('ok');
  });

  it('sends KERNEL_LAUNCH_TIMEOUT from startupTimeoutMs on any gateway', async () => {
    await using gw = await FakeGateway.start();
    await using _kernel = await GatewayKernel.start({
      gateway: { baseUrl: gw.baseUrl, token: gw.token },
      startupTimeoutMs: 20_000,
    });
    // 20 s less a quarter (5 s) for connecting: 15 s, or 14 once the start's first moments are off.
    expect(['14', '15']).toContain(createBody(gw).env?.KERNEL_LAUNCH_TIMEOUT);
  });

  it('answers 403 Resource Limit with GatewayCapacityError (GATEWAY_CAPACITY, retryable), not retried, nothing left', async () => {
    await using gw = await FakeGateway.start({ flavor: 'enterprise-gateway', maxKernels: 1 });
    const gateway = new GatewayClient({ baseUrl: gw.baseUrl, token: gw.token });
    await using _first = await GatewayKernel.start({ gateway });
    const error = await GatewayKernel.start({ gateway }).catch((e: unknown) => e);
    expect(GatewayCapacityError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ code: 'GATEWAY_CAPACITY', retryable: true, status: 403 });
    expect((error as Error).message).toContain('Resource Limit');
    expect(creates(gw)).toHaveLength(2);
    expect(gw.kernels.size).toBe(1);
  });

  it("answers EG's per-user 403 with GatewayCapacityError carrying the limit", async () => {
    await using gw = await FakeGateway.start({ flavor: 'enterprise-gateway', maxKernelsPerUser: 1 });
    const ada = new GatewayClient({ baseUrl: gw.baseUrl, token: gw.token, kernelUsername: 'ada' });
    const bob = new GatewayClient({ baseUrl: gw.baseUrl, token: gw.token, kernelUsername: 'bob' });
    await ada.createKernel({ name: 'python3' });
    await bob.createKernel({ name: 'python3' });
    const error = await ada.createKernel({ name: 'python3' }).catch((e: unknown) => e);
    expect(GatewayCapacityError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ code: 'GATEWAY_CAPACITY', maxKernels: 1, status: 403 });
  });

  it('a 403 that is not a resource limit is still an auth error', async () => {
    await using gw = await FakeGateway.start({ flavor: 'enterprise-gateway' });
    const client = new GatewayClient({ baseUrl: gw.baseUrl, token: 'wrong' });
    const error = await client.createKernel({ name: 'python3' }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'GATEWAY_AUTH', status: 403 });
  });

  it("answers EG's launch-timeout 500 with GatewayBusyError, not retried", async () => {
    await using gw = await FakeGateway.start({ flavor: 'enterprise-gateway', launchDelayMs: 1500 });
    const client = new GatewayClient({ baseUrl: gw.baseUrl, token: gw.token });
    const error = await client.createKernel({ name: 'python3', launchTimeoutMs: 1000 }).catch((e: unknown) => e);
    expect(GatewayBusyError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ code: 'GATEWAY_BUSY', name: 'TimeoutError', retryable: true, waitedMs: 1000 });
    expect((error as Error).message).toContain('launch timeout');
    expect(gw.kernels.size).toBe(0);

    await using slow = await FakeGateway.start({ flavor: 'enterprise-gateway', launchDelayMs: 2500 });
    const started = await GatewayKernel.start({
      gateway: { baseUrl: slow.baseUrl, token: slow.token },
      startupTimeoutMs: 3200,
      createRetryDelayMs: 0,
    }).catch((e: unknown) => e);
    // KERNEL_LAUNCH_TIMEOUT 2 s (3.2 s less a quarter, whole seconds): EG gives up first; the start is not retried.
    expect(GatewayBusyError.isInstance(started)).toBe(true);
    expect((started as Error).message).toContain('launch timeout');
    expect(creates(slow)).toHaveLength(1);
    expect(createBody(slow).env?.KERNEL_LAUNCH_TIMEOUT).toBe('2');
    expect(slow.kernels.size).toBe(0);
  });

  it('a start abandoned during a blocking launch deletes the kernel by its KERNEL_ID once EG has it', async () => {
    await using gw = await FakeGateway.start({ flavor: 'enterprise-gateway', launchDelayMs: 600 });
    const controller = new AbortController();
    const starting = GatewayKernel.start({
      gateway: { baseUrl: gw.baseUrl, token: gw.token },
      signal: controller.signal,
    });
    await until(() => creates(gw).length === 1);
    controller.abort(new Error('user left'));
    await expect(starting).rejects.toThrow('user left');
    const id = createBody(gw).env?.KERNEL_ID;
    // The DELETE by id at once (EG does not know it yet: 404), and again once the launch answered.
    await until(() => gw.requests.filter((r) => r.route === 'delete' && r.kernelId === id).length >= 2);
    await until(() => gw.kernels.size === 0);
    expect(gw.kernel(id).alive).toBe(false);
  });
});
