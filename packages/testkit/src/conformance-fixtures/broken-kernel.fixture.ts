// Run only by vitest.test.ts in a child vitest: a kernel that breaks the contract, to prove the suite can fail.
import type { ExecuteOptions, ExecuteResult } from '@kernelwarden/core';
import { RecordingKernel } from '../recording-kernel.js';
import { describeKernelHandle } from '../vitest.js';
import { scriptedCode, scriptedLanguage } from './scripted-kernel.js';

/** Loses the cell id, keeps state across restart, ignores aborts, and never confirms a shutdown. */
class BrokenKernel extends RecordingKernel {
  override async execute(code: string, opts: ExecuteOptions = {}): Promise<ExecuteResult> {
    const { signal: _ignored, timeoutMs: _alsoIgnored, ...rest } = opts;
    const result = await super.execute(code, rest);
    return { ...result, cellId: 'always-the-same' };
  }
  override async restart(): Promise<void> {
    this.restartCalls++;
    this.live = true;
  }
  override async shutdown(): Promise<{ confirmed: boolean }> {
    this.shutdownCalls++;
    this.live = false;
    return { confirmed: false };
  }
}

describeKernelHandle(
  'BrokenKernel',
  () => new BrokenKernel('broken', { execute: scriptedLanguage, releaseOnInterrupt: true }),
  { code: { ...scriptedCode, sleep: () => 'sleep 1500' }, stdin: true, richOutput: true, testTimeoutMs: 10_000 },
);
