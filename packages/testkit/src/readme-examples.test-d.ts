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
