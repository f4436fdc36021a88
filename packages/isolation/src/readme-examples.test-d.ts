// Type-checked by `tsc --build` and never run: the examples need a Jupyter server and bubblewrap. tools/test-env's
// readme-examples test checks that the README shows each marked block verbatim, with these imports from the published
// names.
import { GatewayKernel } from '@kernelwarden/gateway-client';
import { LocalGateway, type LocalGatewayTicket } from '@kernelwarden/local-gateway';
import type { SlotFactoryContext } from '@kernelwarden/supervisor';
import {
  createKernelPolicy,
  createReadIsolationPolicy,
  detectLimits,
  prepareIsolatedKernel,
  removeIsolatedKernelSpecs,
} from './index.js';

export async function openingExample(): Promise<void> {
  // readme-example:opening:start
  const policy = createReadIsolationPolicy({
    roots: [{ path: '/srv/lab/data', label: 'lab data' }],
    allowedRoots: [{ path: '/srv/lab/data/shared', label: 'shared inputs' }],
  });
  const gateway = await LocalGateway.acquire();
  const kernelName = await prepareIsolatedKernel({ gateway, kernelName: 'python3', policy, workspace: process.cwd() });
  const kernel = await GatewayKernel.start({ gateway, kernelName });
  console.log((await kernel.execute("open('/srv/lab/data/secret.csv')")).error?.ename); // FileNotFoundError
  await kernel.shutdown();
  removeIsolatedKernelSpecs({ kernelSpecDir: gateway.kernelSpecDir, names: [kernelName], inUse: [] });
  await gateway.release();
  // readme-example:opening:end
}

export function sessionExample(ticket: LocalGatewayTicket): unknown {
  // readme-example:session:start
  const python = async (ctx: SlotFactoryContext) => {
    const kernelName = ctx.readIsolation
      ? await prepareIsolatedKernel({
          gateway: ticket,
          policy: ctx.readIsolation,
          workspace: ctx.cwd!,
          hide: [ticket.stateDir],
          signal: ctx.signal,
        })
      : 'python3';
    return GatewayKernel.start({ gateway: ticket, kernelName, cwd: ctx.cwd, signal: ctx.signal });
  };
  // readme-example:session:end
  return python;
}

export async function limitsExample(gateway: LocalGatewayTicket): Promise<string> {
  // readme-example:limits:start
  const policy = createKernelPolicy({ memoryBytes: 512 * 2 ** 20, maxProcesses: 64, cpuSeconds: 600, network: false });
  const kernelName = await prepareIsolatedKernel({
    gateway,
    policy,
    workspace: process.cwd(),
    hide: [gateway.stateDir],
  });
  // ...or with hidden roots too: createReadIsolationPolicy({ roots, allowedRoots, memoryBytes: 512 * 2 ** 20 })
  console.log((await detectLimits({ pid: gateway.pid })).limits.maxProcesses.detail);
  // readme-example:limits:end
  return kernelName;
}
