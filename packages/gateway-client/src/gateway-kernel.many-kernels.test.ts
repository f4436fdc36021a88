import { abortCallbacks } from '@kernelwarden/core';
import { FakeGateway } from '@kernelwarden/testkit';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GatewayClient } from './gateway-client.js';
import { GatewayKernel } from './gateway-kernel.js';

const KERNELS = 200;

describe('200 kernels on one client and one signal', () => {
  const warnings: Error[] = [];
  const onWarning = (warning: Error) => warnings.push(warning);
  beforeEach(() => {
    warnings.length = 0;
    process.on('warning', onWarning);
  });
  afterEach(() => {
    process.off('warning', onWarning);
  });

  it('start, run a cell each and shut down with no MaxListenersExceededWarning, leaving no listener on the signal', async () => {
    await using gw = await FakeGateway.start();
    const client = new GatewayClient({ baseUrl: gw.baseUrl, token: gw.token });
    const shared = new AbortController();
    const kernels = await Promise.all(
      Array.from({ length: KERNELS }, () => GatewayKernel.start({ gateway: client, signal: shared.signal })),
    );
    // A cell per kernel under the same signal, all in flight at once.
    const results = await Promise.all(kernels.map((k, i) => k.execute(`${i} + 1`, { signal: shared.signal })));
    expect(results.every((r) => r.status === 'ok')).toBe(true);
    // Settled operations leave nothing on the shared signal.
    expect(abortCallbacks(shared.signal)).toBe(0);
    await Promise.all(kernels.map((k) => k.shutdown()));
    expect(gw.kernels.size).toBe(0);
    // Node emits the warning on the next tick after the 11th listener.
    await new Promise((r) => setImmediate(r));
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
  });

  it('one abort of the shared signal cancels every pending cell of every kernel', async () => {
    await using gw = await FakeGateway.start();
    const client = new GatewayClient({ baseUrl: gw.baseUrl, token: gw.token });
    const kernels = await Promise.all(Array.from({ length: 20 }, () => GatewayKernel.start({ gateway: client })));
    const shared = new AbortController();
    const pending = kernels.map((k) => k.execute('sleep 5', { signal: shared.signal }));
    expect(abortCallbacks(shared.signal)).toBe(20);
    shared.abort(new Error('session over'));
    const results = await Promise.all(pending);
    expect(results.every((r) => r.cancelled)).toBe(true);
    await Promise.all(kernels.map((k) => k.shutdown()));
    await new Promise((r) => setImmediate(r));
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
  });
});
