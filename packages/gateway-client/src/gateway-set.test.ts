import { readFile } from 'node:fs/promises';
import { InvalidOptionsError } from '@kernelwarden/core';
import { defaultCell, readmeDefaultsFor } from '@kernelwarden/test-env';
import { FakeGateway, ManualClock } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { GatewayCapacityError, GatewayDownError, GatewayUnavailableError, KernelDiedError } from './errors.js';
import { GatewayClient } from './gateway-client.js';
import { GatewayKernel } from './gateway-kernel.js';
import {
  DEFAULT_FAILURES_BEFORE_DOWN,
  DEFAULT_HEALTH_INTERVAL_MS,
  DEFAULT_HEALTH_TIMEOUT_MS,
  GatewaySet,
  type GatewaySetEventMap,
} from './gateway-set.js';

const opts = (gw: FakeGateway) => ({ baseUrl: gw.baseUrl, token: gw.token });

describe('GatewaySet', () => {
  it('places each kernel on the healthy gateway with the fewest kernels, the first given on a tie', async () => {
    await using a = await FakeGateway.start();
    await using b = await FakeGateway.start();
    using set = new GatewaySet([opts(a), opts(b)], { clock: new ManualClock() });
    const kernels: GatewayKernel[] = [];
    try {
      for (let i = 0; i < 3; i++) kernels.push(await GatewayKernel.start({ gateway: set }));
      expect(kernels.map((k) => k.client.baseUrl)).toEqual([a.baseUrl, b.baseUrl, a.baseUrl]);
      // A kernel started elsewhere on b counts too (its listing is read at the next check).
      await new GatewayClient(opts(b)).createKernel({ name: 'python3' });
      await new GatewayClient(opts(b)).createKernel({ name: 'python3' });
      await set.check();
      expect(set.health().map((h) => h.kernels)).toEqual([2, 3]);
      kernels.push(await GatewayKernel.start({ gateway: set }));
      expect(kernels.at(-1)?.client.baseUrl).toBe(a.baseUrl);
      expect((await kernels[1]?.execute('print(2)'))?.stdout).toBe('2\n');
    } finally {
      await Promise.all(kernels.map((k) => k.shutdown()));
    }
  });

  it('uses a placement function given in its options', async () => {
    await using a = await FakeGateway.start();
    await using b = await FakeGateway.start();
    const asked: string[][] = [];
    using set = new GatewaySet([opts(a), opts(b)], {
      clock: new ManualClock(),
      place: (candidates, request) => {
        asked.push([request.kernelName, ...candidates.map((c) => `${c.baseUrl}:${c.kernels}`)]);
        return candidates.at(-1);
      },
    });
    await using k = await GatewayKernel.start({ gateway: set });
    expect(k.client.baseUrl).toBe(b.baseUrl);
    expect(asked).toEqual([['python3', `${a.baseUrl}:0`, `${b.baseUrl}:0`]]);
  });

  it('is usable as new GatewayClient(set): creates placed, calls routed to the kernel gateway, lists merged', async () => {
    await using a = await FakeGateway.start();
    await using b = await FakeGateway.start();
    using set = new GatewaySet([opts(a), opts(b)], { clock: new ManualClock() });
    const client = new GatewayClient(set);
    const one = await client.createKernel({ name: 'python3' });
    const two = await client.createKernel({ name: 'python3' });
    expect(a.kernels.has(one.id)).toBe(true);
    expect(b.kernels.has(two.id)).toBe(true);
    expect((await client.listKernels()).map((k) => k.id).sort()).toEqual([one.id, two.id].sort());
    expect((await client.getKernel(two.id))?.id).toBe(two.id);
    await client.interruptKernel(two.id);
    expect(b.kernel(two.id).interrupts).toBe(1);
    expect(await client.deleteKernel(one.id)).toEqual({ status: 204 });
    expect(await client.deleteKernel(two.id)).toEqual({ status: 204 });
    expect(a.kernels.size + b.kernels.size).toBe(0);
    expect(Object.keys((await client.kernelSpecs()).kernelspecs)).toEqual(['python3']);
  });

  it("fails a dead gateway's running cells within its checks with GatewayDownError naming it, and skips it until it answers again", async () => {
    await using a = await FakeGateway.start();
    await using b = await FakeGateway.start();
    const clock = new ManualClock();
    using set = new GatewaySet([opts(a), opts(b)], { clock, failuresBeforeDown: 2 });
    const events: (GatewaySetEventMap['gateway-down'] | GatewaySetEventMap['gateway-up'])[] = [];
    set.on('gateway-down', (e) => events.push(e));
    set.on('gateway-up', (e) => events.push(e));
    // The kernel's own reconnect would take minutes here: only the set's checks can settle its cell in time.
    await using onA = await GatewayKernel.start({
      gateway: set,
      reconnect: { attempts: 1000, initialDelayMs: 60_000, maxDelayMs: 60_000 },
      livenessPollMs: 0,
      heartbeatMs: 0,
    });
    expect(onA.client.baseUrl).toBe(a.baseUrl);
    const cell = onA.execute('while True: pass').catch((e: unknown) => e);
    // a's REST stops answering (connections reset), as a dead server's would.
    a.failNext('list', 'reset', 'reset', 'reset');
    await clock.advance(2000);
    await clock.advance(2000);
    const error = await cell;
    expect(GatewayDownError.isInstance(error)).toBe(true);
    expect(KernelDiedError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ code: 'GATEWAY_DOWN', url: a.baseUrl, kernelId: onA.id, reason: 'connection-lost' });
    expect((error as Error).message).toContain(a.baseUrl);
    expect(onA.isAlive()).toBe(false);
    expect(events).toEqual([{ baseUrl: a.baseUrl, error: expect.any(Error), lostKernels: [onA.id] }]);
    expect(set.health()[0]).toMatchObject({ healthy: false, failures: 2 });

    // Skipped while down, though it has the fewest kernels (its third check fails too).
    await using onB = await GatewayKernel.start({ gateway: set });
    expect(onB.client.baseUrl).toBe(b.baseUrl);
    // It answers again: up, the kernel failed on it deleted there, and used again.
    await clock.advance(2000);
    await set.check();
    expect(events.at(-1)).toEqual({ baseUrl: a.baseUrl });
    expect(set.health()[0]?.healthy).toBe(true);
    await until(() => !a.kernels.has(onA.id));
    await using again = await GatewayKernel.start({ gateway: set });
    expect(again.client.baseUrl).toBe(a.baseUrl);
  });

  it('attaches to a kernel on whichever gateway of the set runs it, and counts it there', async () => {
    await using a = await FakeGateway.start();
    await using b = await FakeGateway.start();
    using set = new GatewaySet([opts(a), opts(b)], { clock: new ManualClock() });
    const model = await new GatewayClient(opts(b)).createKernel({ name: 'python3' });
    await using attached = await GatewayKernel.connect({ gateway: set, kernelId: model.id });
    expect(attached.client.baseUrl).toBe(b.baseUrl);
    expect((await attached.execute('print(5)')).stdout).toBe('5\n');
    expect(set.health().map((h) => h.kernels)).toEqual([0, 1]);
  });

  it('keeps an Enterprise Gateway that refuses to list kernels healthy, counting the kernels it placed there', async () => {
    await using eg = await FakeGateway.start({ flavor: 'enterprise-gateway', listKernels: false });
    await using b = await FakeGateway.start();
    await new GatewayClient(opts(b)).createKernel({ name: 'python3' });
    using set = new GatewaySet([{ ...opts(eg), flavor: 'enterprise-gateway' }, opts(b)], { clock: new ManualClock() });
    await using first = await GatewayKernel.start({ gateway: set });
    expect(first.client.baseUrl).toBe(eg.baseUrl);
    expect(set.health().map((h) => [h.healthy, h.kernels])).toEqual([
      [true, 1],
      [true, 1],
    ]);
    expect(eg.requests.some((r) => r.route === 'list' && r.answer === 403)).toBe(true);
  });

  it('bounds each health check by healthTimeoutMs', async () => {
    await using a = await FakeGateway.start();
    using set = new GatewaySet([opts(a)], { healthTimeoutMs: 100, failuresBeforeDown: 1 });
    a.failNext('list', 'hang');
    await set.check();
    expect(set.health()[0]).toMatchObject({ healthy: false, failures: 1 });
    expect(set.health()[0]?.lastError?.name).toBe('TimeoutError');
  });

  it('moves a start past an unreachable or full gateway; all full is GatewayCapacityError, none healthy GatewayUnavailableError', async () => {
    await using full = await FakeGateway.start({ flavor: 'enterprise-gateway', maxKernels: 0 });
    await using b = await FakeGateway.start();
    const dead = await FakeGateway.start();
    const deadUrl = dead.baseUrl;
    await dead.close();
    using set = new GatewaySet([{ baseUrl: deadUrl }, opts(full), opts(b)], {
      clock: new ManualClock(),
      place: (c) => c[0],
    });
    await using k = await GatewayKernel.start({ gateway: set });
    expect(k.client.baseUrl).toBe(b.baseUrl);
    expect(full.requests.filter((r) => r.route === 'create')).toHaveLength(1);

    using fullOnly = new GatewaySet([opts(full)], { clock: new ManualClock() });
    const capacity = await GatewayKernel.start({ gateway: fullOnly }).catch((e: unknown) => e);
    expect(GatewayCapacityError.isInstance(capacity)).toBe(true);

    using deadOnly = new GatewaySet([{ baseUrl: deadUrl }], { clock: new ManualClock(), failuresBeforeDown: 1 });
    const none = await GatewayKernel.start({ gateway: deadOnly }).catch((e: unknown) => e);
    expect(GatewayUnavailableError.isInstance(none)).toBe(true);
    expect((none as Error).message).toContain(deadUrl);
  });

  it('stops its checks once it has no kernels, and on close()', async () => {
    await using a = await FakeGateway.start();
    const clock = new ManualClock();
    using set = new GatewaySet([opts(a)], { clock });
    const k = await GatewayKernel.start({ gateway: set });
    expect(clock.pendingTimers()).toBeGreaterThan(0);
    await k.shutdown();
    await clock.advance(2000);
    expect(clock.pendingTimers()).toBe(0);
    await using k2 = await GatewayKernel.start({ gateway: set });
    expect(clock.pendingTimers()).toBeGreaterThan(0);
    set.close();
    expect(clock.pendingTimers()).toBe(0);
    expect(k2.isAlive()).toBe(true);
  });

  it('documents its defaults in the README as the constants say', async () => {
    const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8');
    const expected = {
      healthIntervalMs: defaultCell(DEFAULT_HEALTH_INTERVAL_MS, 'DEFAULT_HEALTH_INTERVAL_MS'),
      healthTimeoutMs: defaultCell(DEFAULT_HEALTH_TIMEOUT_MS, 'DEFAULT_HEALTH_TIMEOUT_MS'),
      failuresBeforeDown: defaultCell(DEFAULT_FAILURES_BEFORE_DOWN, 'DEFAULT_FAILURES_BEFORE_DOWN'),
    };
    expect(readmeDefaultsFor(readme, '`new GatewaySet(gateways, options?)`', expected)).toEqual(expected);
  });

  it('refuses bad options naming the field', () => {
    expect(() => new GatewaySet([])).toThrow(InvalidOptionsError);
    const bad = (() => {
      try {
        new GatewaySet([{ baseUrl: 'http://127.0.0.1:1' }, { baseUrl: 'nope' }]);
      } catch (e) {
        return e as InvalidOptionsError;
      }
      return undefined;
    })();
    expect(bad?.path).toBe('gateways.1.baseUrl');
    expect(() => new GatewaySet([{ baseUrl: 'http://127.0.0.1:1' }], { healthIntervalMs: -1 })).toThrow(
      /healthIntervalMs/,
    );
  });
});

async function until(check: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}
