// Type-checked by `tsc --build` and never run: the example needs a Jupyter server. tools/test-env's readme-examples
// test checks that the README shows each marked block verbatim, with these imports from the published names.
import { GatewayKernel } from '@kernelwarden/gateway-client';
import { LocalGateway } from '@kernelwarden/local-gateway';
import { KernelSession } from '@kernelwarden/supervisor';
import { CellTimeoutError, createWatchdog } from './index.js';

export async function openingExample(): Promise<void> {
  // readme-example:opening:start
  const gateway = await LocalGateway.acquire({ lingerMs: 0 });
  const watchdog = createWatchdog({ cellTimeoutMs: 3_000, interruptGraceMs: 2_000, killGraceMs: 2_000 });
  watchdog.on('*', (event) => console.log(`${event.type} (generation ${event.generation})`));
  const session = new KernelSession({
    python: ({ signal }) => GatewayKernel.start({ gateway, signal }),
    executor: watchdog,
  });
  await session.execute('x = 1');
  console.log((await session.execute('import time; time.sleep(60)')).error?.ename); // interrupt → KeyboardInterrupt; x survives
  await session
    .execute('import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass')
    .catch((error) => console.log(CellTimeoutError.isInstance(error), error.message)); // kill → restart → true 'cell exceeded 3s …'
  console.log((await session.execute("print('x' in globals())")).stdout); // False: the kernel was reset
  await session.close();
  await gateway.release();
  // readme-example:opening:end
}
