import { FakeGateway } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { GatewayAuthError, KernelStartError } from './errors.js';
import { MISSING_REPLY_ENAME } from './execution.js';
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

  it('settles a cell whose execute_reply and idle were lost with a cut socket (probe after the reconnect)', async () => {
    await using gw = await FakeGateway.start({
      script: async (ctx) => {
        ctx.stdout('before\n');
        await ctx.sleep(30);
      },
    });
    await using kernel = await GatewayKernel.start({
      gateway: { baseUrl: gw.baseUrl, token: gw.token },
      reconnect: { initialDelayMs: 1 },
      replyGraceMs: 200,
    });
    const events: string[] = [];
    kernel.on('reconnected', () => events.push('reconnected'));
    // busy, execute_input and the stream go out; the socket is cut; the reply and the idle are written to nothing.
    gw.dropChannelsAfter(3, { kernelId: kernel.id, lose: 2 });
    let bound: NodeJS.Timeout | undefined;
    const hung = new Promise<'hung'>((resolve) => {
      bound = setTimeout(() => resolve('hung'), 15_000);
    });
    const result = await Promise.race([kernel.execute('cell'), hung]).finally(() => clearTimeout(bound));
    expect(result).not.toBe('hung');
    if (result === 'hung') return;
    expect(events).toEqual(['reconnected']);
    expect(result.status).toBe('error');
    expect(result.outputDropped).toBe(true);
    expect(result.error?.ename).toBe(MISSING_REPLY_ENAME);
    expect(result.error?.evalue).toMatch(/lost across a reconnect/);
    expect(result.stdout).toBe('before\n');
    const probes = gw.frames.filter(
      (f) => f.direction === 'in' && f.message?.header.msg_type === 'kernel_info_request',
    );
    expect(probes.length).toBeGreaterThanOrEqual(2); // the start handshake's, then the probe
    expect(kernel.status).toBe('idle');
    expect((await kernel.execute('again')).status).toBe('ok');
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
