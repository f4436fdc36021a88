import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { GatewayKernel } from '@kernelwarden/gateway-client';
import { testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalGateway, type LocalGatewayTicket } from './index.js';

// On LocalGateway's server (iopub rate limits raised) large and chatty outputs arrive complete and in
// order, while the client's memory stays bounded by the output caps.
describe('GatewayKernel throughput on LocalGateway', () => {
  let ticket: LocalGatewayTicket;
  let kernel: GatewayKernel;

  beforeAll(async () => {
    const stateDir = join(testGateway().root, `throughput-${process.pid}`);
    mkdirSync(stateDir, { recursive: true });
    ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0 });
    kernel = await GatewayKernel.start({ gateway: ticket });
  });
  afterAll(async () => {
    await kernel?.shutdown();
    await ticket?.release();
  });

  it('delivers all 20 MB of a cell with nothing dropped, keeping only the capped part', async () => {
    let received = 0;
    const result = await kernel.execute("for i in range(200000):\n    print('x' * 99)", {
      onOutput: (o) => {
        if (o.type === 'stream') received += o.text.length;
      },
    });
    expect(result.status).toBe('ok');
    expect(result.outputDropped).toBeFalsy();
    expect(received).toBe(200_000 * 100);
    expect(result.stdout.length).toBe(1_048_576);
    expect(result.truncated).toBe(true);
  });

  // The 200,000 lines take ~90 s at the kernel's own pace here (ipykernel hands every flush to its IO thread:
  // ~2,000 lines/s through jupyter_client over ZMQ on an idle 2-core machine); the bench runs them. 30,000 lines are
  // enough to matter: on a stock server the iopub SUB socket's 1,000-message high-water mark was overrun within
  // 20,000 lines (951 lines and the cell's idle lost); LocalGateway's server config lifts it.
  it('keeps up with 30,000 flushed short lines: all of them, in order, with memory bounded by small caps', async () => {
    await using chatty = await GatewayKernel.start({
      gateway: ticket,
      outputCaps: { maxStreamChars: 4096, maxOutputs: 10 },
    });
    let next = 0;
    let wrong = 0;
    let partial = '';
    const result = await chatty.execute('for i in range(30000):\n    print(i, flush=True)', {
      onOutput: (o) => {
        if (o.type !== 'stream' || o.name !== 'stdout') return;
        const lines = (partial + o.text).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) {
          if (Number(line) !== next) wrong++;
          next++;
        }
      },
    });
    expect(result.status).toBe('ok');
    expect(result.outputDropped).toBeFalsy();
    expect(next).toBe(30_000);
    expect(wrong).toBe(0);
    // Kept: the caps, not the output (~169 kB).
    expect(result.stdout.length).toBe(4096);
    expect(result.stdout.startsWith('0\n1\n2\n')).toBe(true);
    expect(result.truncated).toBe(true);
    expect(result.outputs.length).toBeLessThanOrEqual(10);
  }, 300_000);
});
