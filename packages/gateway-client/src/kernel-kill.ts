import { abortScope } from '@kernelwarden/core';
import { environmentCode } from './environment-code.js';
import type { ResolvedGatewayKernelOptions } from './gateway-kernel-options.js';
import { claimPooledKernel } from './kernel-start.js';

/**
 * `kill()` on a gateway that kills kernel processes itself (a `LocalGateway` ticket): kills every process of kernel
 * `oldId` at once, then claims a pooled kernel of the same kernelspec and hands its id to `moveTo` (true), deleting
 * the old kernel in the background; with none ready, the server restarts the dead kernel under its id (false).
 */
export async function swapKilledKernel(
  oldId: string,
  kernelName: string,
  opts: ResolvedGatewayKernelOptions,
  moveTo: (kernelId: string) => void,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  const { client, restartTimeoutMs, clock } = opts;
  client.processes?.kill(oldId);
  const scope = abortScope({ signal, timeoutMs: restartTimeoutMs, clock });
  try {
    const model = await claimPooledKernel(client, { ...opts, kernelName }, scope);
    if (!model) {
      await client.restartKernel(oldId, { signal: scope.signal, timeoutMs: restartTimeoutMs });
      return false;
    }
    moveTo(model.id);
    // Its processes are gone: the server's shutdown of it returns at once. An unconfirmed DELETE leaves its owner
    // record (this process), so the gateway reaps it when this process ends.
    void client.deleteKernel(oldId, { timeoutMs: opts.shutdownTimeoutMs }).catch(() => {});
    return true;
  } finally {
    scope.dispose();
  }
}

/** The start's `cwd` and `env` as code of `language`, to apply again to a kernel that replaced the killed one. */
export function environmentStep(opts: ResolvedGatewayKernelOptions, language: string): string | undefined {
  const { cwd, env } = opts;
  return cwd === undefined && env === undefined ? undefined : environmentCode(language, cwd, env);
}
