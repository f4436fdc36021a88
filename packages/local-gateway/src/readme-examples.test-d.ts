// Type-checked by `tsc --build` and never run (it needs a jupyter-server); readme.test.ts checks that the README
// shows this block verbatim.
import { GatewayKernel } from '@kernelwarden/gateway-client';
import { LocalGateway } from './index.js';

export async function quickStart(): Promise<void> {
  // readme-example:start
  const gateway = await LocalGateway.acquire(); // starts jupyter-server, or reuses this user's
  try {
    const kernel = await GatewayKernel.start({ gateway }); // recorded as this process's kernel
    try {
      console.log((await kernel.execute('print(6 * 7)')).stdout); // "42\n"
    } finally {
      await kernel.shutdown();
    }
  } finally {
    await gateway.release(); // the server lingers 30 s for the next process, then stops
  }
  // readme-example:end
}
