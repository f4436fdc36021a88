import { scriptedCode, scriptedLanguage } from './fixtures/scripted-kernel.js';
import { RecordingKernel } from './recording-kernel.js';
import { describeKernelHandle } from './vitest.js';

describeKernelHandle(
  'RecordingKernel (scripted)',
  () => new RecordingKernel('conformance', { execute: scriptedLanguage, releaseOnInterrupt: true }),
  { code: scriptedCode, stdin: true, richOutput: true },
);

describeKernelHandle(
  'RecordingKernel (scripted, kill restarts like a gateway kernel)',
  () =>
    new RecordingKernel('conformance', {
      execute: scriptedLanguage,
      releaseOnInterrupt: true,
      killRestarts: true,
    }),
  { code: scriptedCode, stdin: true, richOutput: true },
);
