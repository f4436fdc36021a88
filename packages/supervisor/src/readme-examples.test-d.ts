// Type-checked by `tsc --build` and never run: the README's examples need a Jupyter server. readme.test.ts checks
// that the README shows these blocks verbatim.
import { GatewayKernel } from '@kernelwarden/gateway-client';
import { LocalGateway } from '@kernelwarden/local-gateway';
import { createLanguageSlot, KernelSession } from './index.js';

export async function openingExample(): Promise<void> {
  // readme-example:opening:start
  const gateway = await LocalGateway.acquire();
  const session = new KernelSession<GatewayKernel>({
    python: (ctx) =>
      GatewayKernel.start({ gateway, kernelName: ctx.env ?? 'python3', cwd: ctx.cwd, signal: ctx.signal }),
    bootstrap: async (lease) => void (await lease.kernel.execute('import math')),
  });
  session.on('kernel_status', (e) => console.log(e.status, e.generation)); // started 0, stopped 0, ended 0
  console.log((await session.execute('print(math.pi)')).stdout); // 3.141592653589793
  await session.stop(); // the kernel is gone from the server
  await session.close();
  await gateway.release();
  // readme-example:opening:end
}

export async function languageSlotExample(gateway: { baseUrl: string; token: string }): Promise<void> {
  // readme-example:julia:start
  const session = new KernelSession({
    python: (ctx) => GatewayKernel.start({ gateway, cwd: ctx.cwd, signal: ctx.signal }),
    slots: {
      julia: createLanguageSlot({
        language: 'julia',
        spawn: (ctx) => GatewayKernel.start({ gateway, kernelName: 'julia-1.11', cwd: ctx.cwd, signal: ctx.signal }),
      }),
    },
  });
  await session.execute('println(1 + 1)', { language: 'julia' });
  // readme-example:julia:end
}
