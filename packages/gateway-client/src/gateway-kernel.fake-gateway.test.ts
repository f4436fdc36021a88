import { FakeGateway } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { GatewayAuthError, KernelStartError } from './errors.js';
import { GatewayKernel } from './gateway-kernel.js';

describe('GatewayKernel against FakeGateway', () => {
  it('returns every line exactly once and in order when the socket is dropped abruptly mid-cell', async () => {
    await using gw = await FakeGateway.start({
      script: async (ctx) => {
        for (let i = 0; i < 50; i++) ctx.stdout(`${i}\n`);
      },
    });
    await using kernel = await GatewayKernel.start({
      gateway: { baseUrl: gw.baseUrl, token: gw.token },
      reconnect: { initialDelayMs: 1 },
    });
    const events: string[] = [];
    kernel.on('reconnected', () => events.push('reconnected'));
    gw.dropChannelsAfter(10, { kernelId: kernel.id });
    const lines: string[] = [];
    const result = await kernel.execute('loop', {
      onOutput: (o) => o.type === 'stream' && lines.push(...o.text.split('\n').filter(Boolean)),
    });
    expect(events).toEqual(['reconnected']);
    expect(gw.frames.some((f) => f.replayed)).toBe(true);
    const expected = Array.from({ length: 50 }, (_, i) => String(i));
    expect(lines).toEqual(expected);
    expect(result.stdout.split('\n').filter(Boolean)).toEqual(expected);
  });

  it('rejects a create that keeps answering 503 with KernelStartError and status 503', async () => {
    await using gw = await FakeGateway.start();
    gw.failNext('create', 503, 503, 503);
    const error = await GatewayKernel.start({ gateway: { baseUrl: gw.baseUrl, token: gw.token } }).catch(
      (e: unknown) => e,
    );
    expect(KernelStartError.isInstance(error)).toBe(true);
    expect((error as KernelStartError).status).toBe(503);
    expect((error as Error).message).toMatch(/^Failed to create kernel/);
  });

  it('rejects a wrong token with GatewayAuthError that does not print it', async () => {
    await using gw = await FakeGateway.start();
    const error = await GatewayKernel.start({ gateway: { baseUrl: gw.baseUrl, token: 'wrong-token-123' } }).catch(
      (e: unknown) => e,
    );
    expect(GatewayAuthError.isInstance(error)).toBe(true);
    expect((error as Error).message).not.toContain('wrong-token-123');
    expect(gw.kernels.size).toBe(0);
  });

  it('confirms a shutdown whose first DELETE hangs on retry, and the kernel is gone', async () => {
    await using gw = await FakeGateway.start();
    const kernel = await GatewayKernel.start({ gateway: { baseUrl: gw.baseUrl, token: gw.token } });
    gw.failNext('delete', 'hang');
    await expect(kernel.shutdown({ timeoutMs: 50 })).resolves.toEqual({ confirmed: false });
    await expect(kernel.shutdown()).resolves.toEqual({ confirmed: true });
    expect(gw.kernels.size).toBe(0);
  });

  it('kill() says it left a fresh interpreter (one server restart); restart() always restarts', async () => {
    await using gw = await FakeGateway.start();
    await using kernel = await GatewayKernel.start({ gateway: { baseUrl: gw.baseUrl, token: gw.token } });
    const restarts = () => gw.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/restart')).length;
    await expect(kernel.kill()).resolves.toEqual({ restarted: true });
    expect(restarts()).toBe(1);
    expect(kernel.isAlive()).toBe(true);
    expect(kernel.status).toBe('idle');
    expect((await kernel.execute('print(1)')).stdout).toBe('1\n');
    await kernel.restart();
    expect(restarts()).toBe(2);
    await kernel.restart();
    expect(restarts()).toBe(3);
  });
});
