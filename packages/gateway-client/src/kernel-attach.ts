import { InvalidOptionsError, type KernelHandle } from '@kernelwarden/core';
import type { GatewayClient, KernelModel } from './gateway-client.js';
import {
  type GatewayKernelConnectOptions,
  type ResolvedGatewayKernelOptions,
  resolveGatewayKernelOptions,
} from './gateway-kernel-options.js';
import type { PlacedKernel } from './gateway-set.js';
import { type StartingKernel, startKernel } from './kernel-start.js';

/**
 * `GatewayKernel.connect()`: validates `kernelId`, finds the member of a `GatewaySet` that runs the kernel, and runs
 * the start sequence on the existing kernel (`create` builds the handle for its model).
 */
export async function attachKernel<K extends KernelHandle & PlacedKernel>(
  options: GatewayKernelConnectOptions,
  create: (model: KernelModel, opts: ResolvedGatewayKernelOptions) => { kernel: K; starting: StartingKernel },
): Promise<K> {
  if (typeof options?.kernelId !== 'string' || options.kernelId === '') {
    throw new InvalidOptionsError([{ path: 'kernelId', message: 'must be the id of a kernel of the gateway' }], {
      subject: 'GatewayKernel.connect options',
    });
  }
  let opts = resolveGatewayKernelOptions(options);
  const router = opts.client.router;
  let member: GatewayClient | undefined;
  if (router) {
    const owner = await opts.client.getKernel(options.kernelId, opts.signal ? { signal: opts.signal } : {});
    member = owner ? router.clientFor(options.kernelId) : undefined;
    if (member) opts = Object.freeze({ ...opts, client: member });
  }
  const resolved = opts;
  const kernel = await startKernel(resolved, (model) => create(model, resolved), {
    kind: 'attach',
    kernelId: options.kernelId,
  });
  if (router && member) router.placed(member, kernel);
  return kernel;
}
