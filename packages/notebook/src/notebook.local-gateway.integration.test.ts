import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { GatewayClient, GatewayKernel } from '@kernelwarden/gateway-client';
import { LocalGateway, type LocalGatewayTicket } from '@kernelwarden/local-gateway';
import { KernelSession } from '@kernelwarden/supervisor';
import { kernelPids, testGateway } from '@kernelwarden/test-env';
import { createWatchdog } from '@kernelwarden/watchdog';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMessageTap, runNotebook } from './index.js';

describe("runNotebook on the embedded gateway, the tap wrapping the ticket's guarded WebSocket", () => {
  const stateDir = join(testGateway().root, `notebook-${randomBytes(4).toString('hex')}`);
  const kernels: GatewayKernel[] = [];
  let ticket: LocalGatewayTicket;
  let session: KernelSession<GatewayKernel>;
  const tap = createMessageTap();

  beforeAll(async () => {
    mkdirSync(stateDir, { recursive: true });
    ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0 });
    const client = new GatewayClient({
      baseUrl: ticket.baseUrl,
      token: ticket.token,
      fetch: ticket.fetch,
      request: ticket.request,
      ownership: ticket.ownership,
      processes: ticket.processes,
      WebSocket: tap.wrap(ticket.WebSocket),
    });
    session = new KernelSession<GatewayKernel>({
      python: async (ctx) => {
        const kernel = await GatewayKernel.start({ gateway: client, signal: ctx.signal });
        kernels.push(kernel);
        return kernel;
      },
      executor: createWatchdog({ cellTimeoutMs: 60_000 }),
    });
  });

  afterAll(async () => {
    await session?.close();
    for (const kernel of kernels) await kernel.shutdown();
    await ticket?.release();
    await LocalGateway.stop({ stateDir, stopTimeoutMs: 5_000 });
    for (const kernel of kernels) expect(kernelPids(kernel.id)).toEqual([]);
  });

  it('sees update_display_data and clear_output through the guarded socket', async () => {
    const cell = (source: string) => ({ cell_type: 'code', metadata: {}, source, execution_count: null, outputs: [] });
    const run = await runNotebook(
      {
        nbformat: 4,
        nbformat_minor: 4,
        metadata: { kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' } },
        cells: [
          cell("from IPython.display import display, clear_output\nh = display('first', display_id=True)"),
          cell(
            "import sys\nh.update('second')\n_ = sys.stdout.write('x\\n')\nclear_output(wait=True)\n_ = sys.stdout.write('y\\n')",
          ),
        ],
      },
      { session, tap },
    );
    const outputs = run.notebook.cells.map((c) => (c as { outputs: unknown[] }).outputs);
    expect(outputs).toEqual([
      [{ output_type: 'display_data', data: { 'text/plain': "'second'" }, metadata: {} }],
      [{ output_type: 'stream', name: 'stdout', text: 'y\n' }],
    ]);
    expect(tap.watching).toBe(0);
  });
});
