import { GatewayKernel } from '@kernelwarden/gateway-client';
import { FakeGateway } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { R_INTERRUPTED, startIRKernel } from './ir-kernel.js';

/** A stand-in for IRkernel: `hang` runs until interrupted (then a bare `abort` reply), anything else prints its code. */
function fakeR() {
  return FakeGateway.start({
    kernelSpecs: { ir: { displayName: 'R', language: 'R', interruptReply: 'abort' } },
    script: async (ctx) => {
      if (ctx.code === 'hang') await ctx.hang();
      ctx.stdout(ctx.code);
    },
  });
}

/** Whether the gateway was asked to delete kernel `id`. */
function deleted(gw: FakeGateway, id: string): boolean {
  return gw.requests.some((r) => r.method === 'DELETE' && r.path === `/api/kernels/${id}`);
}

describe('startIRKernel', () => {
  it('returns the started GatewayKernel wrapped: its members answer, and the kernel itself is left unpatched', async () => {
    await using gw = await fakeR();
    const kernel = await startIRKernel({ gateway: { baseUrl: gw.baseUrl, token: gw.token } });
    try {
      expect(kernel).toBeInstanceOf(GatewayKernel);
      expect(kernel.kernelName).toBe('ir');
      expect(gw.kernel(kernel.id)).toBeDefined();
      expect(kernel.status).toBe('idle');
      expect(kernel.isAlive()).toBe(true);
      // Methods read through the wrapper act on the kernel, and stay the same function from one read to the next.
      expect(kernel.on).toBe(kernel.on);
      const statuses: string[] = [];
      const off = kernel.on('status', (event) => statuses.push(event.status));
      expect(await kernel.execute('cat(1)')).toMatchObject({ status: 'ok', stdout: 'cat(1)' });
      off();
      expect(statuses).toContain('busy');
      // No own `execute`, `shutdown` or dispose was defined on the kernel: what it does is its class's.
      for (const key of ['execute', 'shutdown', Symbol.asyncDispose]) {
        expect(Object.getOwnPropertyDescriptor(kernel, key)).toBeUndefined();
      }
    } finally {
      expect(await kernel.shutdown()).toEqual({ confirmed: true });
    }
    expect(kernel.isAlive()).toBe(false);
    expect(kernel.status).toBe('closed');
    expect(deleted(gw, kernel.id)).toBe(true);
  });

  it("turns IRkernel's bare abort reply into an interrupted result", async () => {
    await using gw = await fakeR();
    const kernel = await startIRKernel({ gateway: { baseUrl: gw.baseUrl, token: gw.token } });
    try {
      const hanging = kernel.execute('hang');
      await new Promise((r) => setTimeout(r, 100));
      expect(await kernel.interrupt()).toEqual({ delivered: true });
      expect(await hanging).toMatchObject({ status: 'aborted', error: R_INTERRUPTED, cancelled: false });
      expect(await kernel.execute('after')).toMatchObject({ status: 'ok', stdout: 'after' });
      expect((await kernel.execute('after')).error).toBeUndefined();
    } finally {
      await kernel.shutdown();
    }
  });

  it('is shut down by `await using` the way shutdown() does it: a busy kernel is interrupted first', async () => {
    await using gw = await fakeR();
    let id = '';
    let hanging: Promise<unknown> = Promise.resolve();
    {
      await using kernel = await startIRKernel({ gateway: { baseUrl: gw.baseUrl, token: gw.token } });
      id = kernel.id;
      hanging = kernel.execute('hang').catch((error: unknown) => error);
      await new Promise((r) => setTimeout(r, 100));
      expect(kernel.status).toBe('busy');
    }
    expect(deleted(gw, id)).toBe(true);
    expect(gw.requests.some((r) => r.method === 'POST' && r.path === `/api/kernels/${id}/interrupt`)).toBe(true);
    expect(await hanging).toMatchObject({ cancelled: true });
  });
});
