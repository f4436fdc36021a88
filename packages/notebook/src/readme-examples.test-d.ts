// Type-checked by `tsc --build` and never run: the example needs a Jupyter server. tools/test-env's readme-examples
// test checks that the README shows each marked block verbatim, with these imports from the published names.
import { GatewayClient, GatewayKernel } from '@kernelwarden/gateway-client';
import { LocalGateway } from '@kernelwarden/local-gateway';
import { KernelSession } from '@kernelwarden/supervisor';
import { createWatchdog } from '@kernelwarden/watchdog';
import { createMessageTap, runNotebook } from './index.js';

export async function openingExample(): Promise<void> {
  // readme-example:opening:start
  const ticket = await LocalGateway.acquire();
  const tap = createMessageTap();
  // The tap sees the raw messages of the notebook's cells on the kernels' sockets (see "The message tap").
  const client = new GatewayClient({
    baseUrl: ticket.baseUrl,
    token: ticket.token,
    fetch: ticket.fetch,
    request: ticket.request,
    ownership: ticket.ownership,
    processes: ticket.processes,
    WebSocket: tap.wrap(ticket.WebSocket),
  });
  const session = new KernelSession({
    python: (ctx) => GatewayKernel.start({ gateway: client, signal: ctx.signal }),
    executor: createWatchdog({ cellTimeoutMs: 60_000 }),
  });
  const run = await runNotebook('report.ipynb', {
    session,
    tap,
    parameters: { alpha: 0.6, region: 'eu' },
    outputPath: 'report.out.ipynb',
    onCell: (cell) => console.log(cell.index, cell.status),
  });
  console.log(run.cells.filter((c) => c.status === 'ok').length, 'cells ran');
  await session.close();
  await ticket.release();
  // readme-example:opening:end
}
