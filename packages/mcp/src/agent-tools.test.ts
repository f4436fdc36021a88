import { KernelSession } from '@kernelwarden/supervisor';
import { okResult, RecordingKernel } from '@kernelwarden/testkit';
import { createWatchdog } from '@kernelwarden/watchdog';
import { describe, expect, it } from 'vitest';
import { createAgentTools } from './agent-tools.js';

function sessionWith(kernel: RecordingKernel) {
  return new KernelSession({ python: () => kernel, executor: createWatchdog({ cellTimeoutMs: 0 }) });
}

describe('createAgentTools', () => {
  it('runs code and gives the model text and image parts', async () => {
    const png = Buffer.from('png bytes').toString('base64');
    const kernel = new RecordingKernel('python', {
      execute: (_code, opts) => {
        opts.onOutput?.({ type: 'stream', name: 'stdout', text: '3\n' });
        opts.onOutput?.({ type: 'display_data', data: { 'image/png': png }, metadata: {} });
        return okResult(opts.cellId);
      },
    });
    await using session = sessionWith(kernel);
    const tools = createAgentTools(session);
    const output = await tools.run_code.execute!(
      { code: 'print(1 + 2)' },
      { toolCallId: 't1', messages: [], context: {} },
    );
    expect(output).toMatchObject({ isError: false });
    const forModel = await tools.run_code.toModelOutput!({
      toolCallId: 't1',
      input: { code: '' },
      output: output as never,
    });
    expect(forModel).toEqual({
      type: 'content',
      value: [
        { type: 'text', text: '3\n' },
        { type: 'file', mediaType: 'image/png', data: { type: 'data', data: png } },
      ],
    });
  });

  it('validates input with a zod schema', () => {
    const tools = createAgentTools(sessionWith(new RecordingKernel('python')));
    const schema = tools.run_code.inputSchema as unknown as { safeParse(v: unknown): { success: boolean } };
    expect(schema.safeParse({ code: 'x', language: 'r', timeout_seconds: 3 }).success).toBe(true);
    expect(schema.safeParse({ code: 'x', language: 'julia' }).success).toBe(false);
  });

  it('interrupts the cell when the call is aborted, and the kernel keeps running', async () => {
    const kernel = new RecordingKernel('python', { hold: true, releaseOnInterrupt: true });
    await using session = sessionWith(kernel);
    const tools = createAgentTools(session);
    const controller = new AbortController();
    const running = tools.run_code.execute!(
      { code: 'sleep()' },
      { toolCallId: 't2', messages: [], context: {}, abortSignal: controller.signal },
    );
    await kernel.executeEntered.wait();
    controller.abort(new Error('stop'));
    const output = await running;
    expect(output).toMatchObject({ isError: true });
    expect(kernel.interruptCalls).toBe(1);
    expect(kernel.killCalls).toBe(0);
  });
});
