// Type-checked by `tsc --build` and never run (the first example is readme-example.test.ts, which runs).
// tools/test-env's readme-examples test checks that the README shows each marked block verbatim, with these imports
// from the published names.
import type { KernelHandle } from '@kernelwarden/core';
import { FakeGateway, RecordingKernel } from './index.js';
import { describeKernelHandle, pythonConformanceCode } from './vitest.js';

export async function kernelSpecsExample(): Promise<void> {
  // readme-example:kernel-specs:start
  const gw = await FakeGateway.start({
    kernelSpecs: {
      python3: {}, // pythonLikeScript
      ir: {
        language: 'R',
        interruptReply: 'abort',
        script: async (ctx) => {
          ctx.stdout('[1] 1\n');
        },
      },
    },
  });
  // readme-example:kernel-specs:end
  await gw.close();
}

export async function recordingKernelExample(): Promise<void> {
  // readme-example:recording-kernel:start
  const events: string[] = [];
  const python = new RecordingKernel('python', { events, hold: true, releaseOnInterrupt: true });
  const running = python.execute('pass');
  await python.executeEntered.wait(); // the execution has started
  await python.interrupt(); // releases it (releaseOnInterrupt)
  await running;
  // events: ['python:execute-enter', 'python:interrupt', 'python:execute-exit']
  // readme-example:recording-kernel:end
}

export function conformanceExample(
  MyKernel: { start(): Promise<KernelHandle> },
  server: { close(): Promise<void> },
): void {
  // readme-example:conformance:start
  describeKernelHandle('MyKernel', async () => ({ kernel: await MyKernel.start(), cleanup: () => server.close() }), {
    code: pythonConformanceCode, // or your language: { setVar, printVar, print, raise, sleep, join?, input?, richOutput? }
    stdin: true,
    richOutput: true,
  });
  // readme-example:conformance:end
}

export async function enterpriseGatewayExample(): Promise<void> {
  // readme-example:enterprise-gateway:start
  await using eg = await FakeGateway.start({
    flavor: 'enterprise-gateway',
    launchDelayMs: 2_000, // each create blocks this long (a pod starting), on the gateway's clock
    maxKernels: 4, // 403 "Resource Limit" past it; launches in progress count
    maxKernelsPerUser: 2, // 403 "A max kernels per user limit has been set to 2 …", by KERNEL_USERNAME
    launchTimeoutSeconds: 30, // when a create sends no KERNEL_LAUNCH_TIMEOUT (EG_KERNEL_LAUNCH_TIMEOUT)
    clientEnvs: ['TZ'], // names besides KERNEL_* passed to the kernel (EG's client_envs); ['*'] for all
    listKernels: false, // GET /api/kernels answers 403 "Forbidden" (EG's list_kernels off)
  });
  console.log(eg.baseUrl, eg.token); // a GatewayClient's options, as for the default flavour
  // readme-example:enterprise-gateway:end
}
