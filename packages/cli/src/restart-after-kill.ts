import type { KernelHandle } from '@kernelwarden/core';

/**
 * Wraps a kernel so that a `restart()` right after a `kill()` that left the kernel alive does nothing.
 *
 * A `GatewayKernel`'s `kill()` is a server-side restart: when it resolves, the interpreter is already fresh. The
 * watchdog's ladder then calls `restart()` on the same lease, which would start the interpreter a second time —
 * a full kernel start (about a second, several on a loaded machine) added to every timeout recovery. Any
 * `execute()` in between, or a kill that left the kernel dead, makes the next `restart()` real again.
 */
export function skipRestartAfterKill<K extends KernelHandle>(kernel: K): KernelHandle {
  let freshFromKill = false;
  return {
    get id() {
      return kernel.id;
    },
    isAlive: () => kernel.isAlive(),
    execute: (code, opts) => {
      freshFromKill = false;
      return kernel.execute(code, opts);
    },
    interrupt: (opts) => kernel.interrupt(opts),
    kill: async (opts) => {
      freshFromKill = false;
      await kernel.kill(opts);
      freshFromKill = kernel.isAlive();
    },
    restart: async (opts) => {
      if (freshFromKill && kernel.isAlive()) {
        freshFromKill = false;
        return;
      }
      freshFromKill = false;
      await kernel.restart(opts);
    },
    shutdown: (opts) => {
      freshFromKill = false;
      return kernel.shutdown(opts);
    },
  };
}
