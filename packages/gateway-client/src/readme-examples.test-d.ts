// Type-checked by `tsc --build` and never run: the example needs a Jupyter server. tools/test-env's readme-examples
// test checks that the README shows each marked block verbatim, with these imports from the published names.
import { GatewayKernel } from './index.js';

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
