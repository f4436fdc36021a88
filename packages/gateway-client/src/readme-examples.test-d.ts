// Type-checked by `tsc --build` and never run: the example needs a Jupyter server. tools/test-env's readme-examples
// test checks that the README shows each marked block verbatim, with these imports from the published names.
import { GatewayKernel, GatewaySet } from './index.js';

export async function openingExample(): Promise<void> {
  // readme-example:opening:start
  const kernel = await GatewayKernel.start({
    gateway: { baseUrl: 'http://127.0.0.1:8888', token: process.env.JUPYTER_TOKEN },
    cwd: '/tmp',
    startupTimeoutMs: 30_000,
  });
  try {
    const result = await kernel.execute("print('hello')\n6 * 7", {
      timeoutMs: 10_000,
      onOutput: (o) => console.log(o),
    });
    console.log(result.status, result.stdout, result.outputs.at(-1)); // ok "hello\n" { type: 'execute_result', … }
  } finally {
    await kernel.shutdown(); // or `await using kernel = …` where explicit resource management is available
  }
  // readme-example:opening:end
}

export async function gatewaySetExample(): Promise<void> {
  // readme-example:gateway-set:start
  const set = new GatewaySet([
    { baseUrl: 'http://gw-1.internal:8888', token: process.env.GW1_TOKEN },
    { baseUrl: 'http://gw-2.internal:8888', token: process.env.GW2_TOKEN },
  ]);
  await using kernel = await GatewayKernel.start({ gateway: set }); // on the healthy gateway with the fewest kernels
  set.on('gateway-down', ({ baseUrl, lostKernels }) => console.warn(`${baseUrl} down, lost ${lostKernels.length}`));
  console.log((await kernel.execute('print(6 * 7)')).stdout); // 42
  // readme-example:gateway-set:end
}

declare const ticket: { baseUrl: string; token: string };
declare const longCell: string;
declare function saveSomewhere(kernelId: string, msgId: string): void;

export async function collectExample(kernelId: string, msgId: string): Promise<void> {
  // readme-example:collect:start
  // Process 1
  const kernel = await GatewayKernel.start({ gateway: ticket });
  kernel.on('execute-request', ({ msgId }) => saveSomewhere(kernel.id, msgId));
  void kernel.execute(longCell);

  // Process 2, later, after process 1 went away
  const again = await GatewayKernel.attach({ gateway: ticket, kernelId });
  const result = await again.collect(msgId); // every line the cell printed, in order
  // readme-example:collect:end
  console.log(result.stdout);
}
