import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { GatewayClient, GatewayKernel, LocalGateway } from '@kernelwarden/gateway-client';
import { testGateway } from '@kernelwarden/test-env';
import { describe, expect, it } from 'vitest';

describe('LocalGateway imported from gateway-client (deprecated), on a real jupyter-server', () => {
  it('acquires a real lease that runs a kernel, reports it in status, and stops the server at the last release', async () => {
    const stateDir = join(testGateway().root, `compat-${randomBytes(4).toString('hex')}`);
    mkdirSync(stateDir, { recursive: true });
    const lease = await LocalGateway.acquire({ stateDir, lingerMs: 0 });
    try {
      expect(lease.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(JSON.stringify(lease)).not.toContain(lease.token);
      const kernel = await GatewayKernel.start({ gateway: lease });
      try {
        expect((await kernel.execute('print(6 * 7)')).stdout).toBe('42\n');
        const status = await LocalGateway.status({ stateDir });
        expect(status).toMatchObject({ running: true, pid: lease.pid });
        expect(status.kernels.map((k) => k.id)).toContain(kernel.id);
      } finally {
        await kernel.shutdown();
      }
    } finally {
      await lease.release();
    }
    expect((await LocalGateway.status({ stateDir })).running).toBe(false);
    await expect(new GatewayClient(lease).listKernels()).rejects.toThrow(/not listening|gone/);
  });
});
