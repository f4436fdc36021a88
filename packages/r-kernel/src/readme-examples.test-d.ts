// Type-checked by `tsc --build` and never run: the example needs a Jupyter server with IRkernel. tools/test-env's
// readme-examples test checks that the README shows each marked block verbatim, with these imports from the published
// names.
import { GatewayKernel } from '@kernelwarden/gateway-client';
import { LocalGateway } from '@kernelwarden/local-gateway';
import { KernelSession } from '@kernelwarden/supervisor';
import { createRSlot, startIRKernel } from './index.js';

export async function openingExample(): Promise<void> {
  // readme-example:opening:start
  const gateway = await LocalGateway.acquire();
  const session = new KernelSession({
    python: (ctx) => GatewayKernel.start({ gateway, signal: ctx.signal }),
    r: createRSlot({ spawn: (ctx) => startIRKernel({ gateway, cwd: ctx.cwd, signal: ctx.signal }) }),
  });
  console.log((await session.execute('cat(1 + 1)', { language: 'r' })).stdout); // "2" (R starts only now)
  await session.close();
  await gateway.release();
  // readme-example:opening:end
}
