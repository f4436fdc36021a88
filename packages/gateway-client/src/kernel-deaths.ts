import { GatewayDownError, KernelDiedError } from './errors.js';

/** The errors a `GatewayKernel` fails with, worded in one place (`id` the kernel's, `url` its gateway's). */
export const kernelDeaths = {
  /** A call on a handle that is no longer alive. */
  notAlive(id: string, url: string, shutDown: boolean): KernelDiedError {
    const why = shutDown ? 'was shut down' : 'died';
    return new KernelDiedError(`Kernel ${id} at ${url} ${why}; start a new one`, {
      reason: shutDown ? 'shutdown' : 'dead',
      kernelId: id,
    });
  },
  /** The handle let go of the kernel, or closed it (`why`: "was shut down", "was detached", …). */
  closed(id: string, url: string, why: string): KernelDiedError {
    return new KernelDiedError(`Kernel ${id} at ${url} ${why}`, { reason: 'shutdown', kernelId: id });
  },
  /** A `GatewaySet` found the kernel's gateway down. */
  gatewayDown(id: string, url: string, cause: unknown): GatewayDownError {
    return new GatewayDownError(
      `Gateway ${url} stopped answering; kernel ${id} on it is lost with its state (start a new kernel)`,
      { url, kernelId: id, cause },
    );
  },
  /** The channels socket could not be reopened, and the kernel still exists. */
  connectionLost(id: string, url: string, cause: unknown): KernelDiedError {
    return new KernelDiedError(
      `Lost the connection to kernel ${id} at ${url} for good; the output of running cells is lost`,
      { reason: 'connection-lost', kernelId: id, cause },
    );
  },
  /** REST says the kernel is dead, or gone from the gateway. */
  probed(id: string, url: string, probe: 'dead' | 'gone'): KernelDiedError {
    return new KernelDiedError(
      probe === 'dead'
        ? `Kernel ${id} at ${url} is dead`
        : `Kernel ${id} vanished from the gateway at ${url} (it was shut down or culled elsewhere)`,
      { reason: probe, kernelId: id },
    );
  },
};
