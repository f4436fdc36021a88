import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { GatewayClient, GatewayKernel } from '@kernelwarden/gateway-client';
import { cuttableProxy, testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalGateway, type LocalGatewayLease } from './index.js';

const CELL = 'import time\nfor i in range(1000):\n    print(i, flush=True)\n    time.sleep(0.002)';
const EXPECTED = Array.from({ length: 1000 }, (_, i) => `${i}\n`).join('');

describe('a socket cut mid-cell on the embedded gateway', () => {
  let lease: LocalGatewayLease;

  beforeAll(async () => {
    const stateDir = join(testGateway().root, `journal-reconnect-${randomBytes(4).toString('hex')}`);
    mkdirSync(stateDir, { recursive: true });
    lease = await LocalGateway.acquire({ stateDir, lingerMs: 0, pool: {} });
  });
  afterAll(async () => {
    await lease?.release();
  });

  it('loses nothing: 1,000 flushed lines arrive once each, in order, and the result says nothing was dropped', async () => {
    const proxy = await cuttableProxy(Number(new URL(lease.baseUrl).port));
    try {
      const client = new GatewayClient({ baseUrl: proxy.baseUrl, token: lease.token, ownership: lease.ownership });
      await using kernel = await GatewayKernel.start({ gateway: client });
      let reconnected = 0;
      kernel.on('reconnected', () => {
        reconnected++;
      });
      let seen = '';
      let cuts = 0;
      const result = await kernel.execute(CELL, {
        onOutput: (output) => {
          if (output.type !== 'stream') return;
          seen += output.text;
          // Cut twice, mid-cell: the journal on the server fills each gap.
          if ((cuts === 0 && seen.includes('\n300\n')) || (cuts === 1 && seen.includes('\n700\n'))) {
            cuts++;
            proxy.cut(kernel.id);
          }
        },
      });
      expect(cuts).toBe(2);
      expect(reconnected).toBeGreaterThanOrEqual(1);
      expect(result.status).toBe('ok');
      expect(result.stdout).toBe(EXPECTED);
      expect(seen).toBe(EXPECTED);
      expect(result.outputDropped).toBeFalsy();
    } finally {
      await proxy.close();
    }
  });
});
