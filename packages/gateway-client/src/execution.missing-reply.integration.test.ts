import { testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayKernel, MISSING_REPLY_ENAME } from './index.js';

describe('GatewayKernel when ipykernel goes idle without replying (real jupyter-server)', () => {
  let kernel: GatewayKernel;

  beforeAll(async () => {
    const { baseUrl, token } = testGateway();
    kernel = await GatewayKernel.start({ gateway: { baseUrl, token }, startupTimeoutMs: 60_000 });
  });
  afterAll(async () => {
    await kernel?.shutdown();
  });

  it('settles a cell with a NUL character within seconds as a KernelProtocolError, not at its timeout, and the next cell runs', async () => {
    // ipykernel's execute handler raises on source with a NUL ("source code string cannot contain null bytes"):
    // it publishes busy and idle and never sends the execute_reply.
    const started = performance.now();
    const result = await kernel.execute('x = 1\0', { timeoutMs: 60_000, cellId: 'nul-cell' });
    const tookMs = performance.now() - started;
    expect(result).toMatchObject({
      status: 'error',
      cellId: 'nul-cell',
      timedOut: false,
      cancelled: false,
      error: { ename: MISSING_REPLY_ENAME },
    });
    expect(result.error?.evalue).toMatch(/went idle without replying/);
    // The default grace is 3 s; the bound is generous for a loaded machine, far below the 60 s timeout.
    expect(tookMs).toBeLessThan(30_000);
    expect(kernel.isAlive()).toBe(true);
    const next = await kernel.execute('print(6 * 7)', { timeoutMs: 60_000 });
    expect(next).toMatchObject({ status: 'ok', stdout: '42\n' });
  });
});
