import { testGateway } from '@kernelwarden/test-env';
import { describeKernelHandle, pythonConformanceCode } from '@kernelwarden/testkit/vitest';
import { GatewayKernel } from './gateway-kernel.js';

// testkit's KernelHandle conformance suite against GatewayKernel on the real jupyter-server.
describeKernelHandle(
  'GatewayKernel (python3 on jupyter-server)',
  async () => {
    const { baseUrl, token } = testGateway();
    const kernel = await GatewayKernel.start({ gateway: { baseUrl, token } });
    return { kernel, cleanup: async () => void (await kernel.shutdown()) };
  },
  { code: pythonConformanceCode, stdin: true, richOutput: true, testTimeoutMs: 60_000 },
);
