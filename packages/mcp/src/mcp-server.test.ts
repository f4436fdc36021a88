import { join } from 'node:path';
import { InvalidOptionsError } from '@kernelwarden/core';
import { KernelSession } from '@kernelwarden/supervisor';
import { okResult, RecordingKernel } from '@kernelwarden/testkit';
import { createWatchdog } from '@kernelwarden/watchdog';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { createMcpServer } from './mcp-server.js';
import { DEFAULT_SERVER_NAME, resolveMcpServerOptions } from './server-options.js';
import { resolveKernelToolOptions } from './tool-options.js';

async function connected(kernel: RecordingKernel) {
  const session = new KernelSession({ python: () => kernel, executor: createWatchdog({ cellTimeoutMs: 0 }) });
  const server = createMcpServer({ session, progressIntervalMs: 0 });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'test', version: '0' });
  await client.connect(clientSide);
  return {
    client,
    [Symbol.asyncDispose]: async () => {
      await client.close();
      await server.close();
      await session.close();
    },
  };
}

describe('createMcpServer', () => {
  it('answers run_code with text and image content', async () => {
    const png = Buffer.from('\x89PNG fake').toString('base64');
    const kernel = new RecordingKernel('python', {
      execute: (_code, opts) => {
        opts.onOutput?.({ type: 'stream', name: 'stdout', text: 'hi\n' });
        opts.onOutput?.({ type: 'display_data', data: { 'image/png': png }, metadata: {} });
        return okResult(opts.cellId);
      },
    });
    await using mcp = await connected(kernel);
    const result = (await mcp.client.callTool({ name: 'run_code', arguments: { code: 'plot()' } })) as CallToolResult;
    expect(result.content).toEqual([
      { type: 'text', text: 'hi\n' },
      { type: 'image', data: png, mimeType: 'image/png' },
    ]);
    expect(result.isError).toBe(false);
  });

  it('rejects run_code input of the wrong shape without running anything', async () => {
    const kernel = new RecordingKernel('python');
    await using mcp = await connected(kernel);
    const result = (await mcp.client.callTool({
      name: 'run_code',
      arguments: { code: 'x', language: 'julia' },
    })) as CallToolResult;
    expect(result.isError).toBe(true);
    expect(kernel.executeCalls).toBe(0);
  });

  it('sends progress notifications with the output while the cell runs, when the client asks for them', async () => {
    const kernel = new RecordingKernel('python', {
      execute: async (_code, opts, k) => {
        opts.onOutput?.({ type: 'stream', name: 'stdout', text: 'step 1\n' });
        await k.executeRelease.wait();
        opts.onOutput?.({ type: 'stream', name: 'stdout', text: 'step 2\n' });
        return okResult(opts.cellId);
      },
    });
    await using mcp = await connected(kernel);
    const messages: string[] = [];
    const call = mcp.client.callTool({ name: 'run_code', arguments: { code: 'steps()' } }, undefined, {
      onprogress: (p) => {
        messages.push(p.message ?? '');
        kernel.executeRelease.open();
      },
    });
    await call;
    expect(messages.join('')).toContain('step 1');
  });

  it('interrupts the kernel when the client cancels the call', async () => {
    const kernel = new RecordingKernel('python', { hold: true, releaseOnInterrupt: true });
    await using mcp = await connected(kernel);
    const controller = new AbortController();
    const call = mcp.client.callTool({ name: 'run_code', arguments: { code: 'sleep()' } }, undefined, {
      signal: controller.signal,
    });
    await kernel.executeEntered.wait();
    controller.abort(new Error('the user cancelled'));
    await expect(call).rejects.toThrow(/cancelled/);
    await expect.poll(() => kernel.interruptCalls).toBe(1);
    expect(kernel.killCalls).toBe(0);
  });

  it('names the bad field of its options', () => {
    expect(() => createMcpServer({ session: {} as never })).toThrow(InvalidOptionsError);
    expect(() => createMcpServer({ session: {} as never })).toThrow(/options\.session/);
    const session = new KernelSession({ python: () => new RecordingKernel('python') });
    expect(() => createMcpServer({ session, maxImages: -1 })).toThrow(/options\.maxImages/);
    expect(() => createMcpServer({ session, name: '' })).toThrow(/options\.name/);
  });

  it('resolves its options in one place: the session, the default name and the tool defaults', () => {
    const session = new KernelSession({ python: () => new RecordingKernel('python') });
    const resolved = resolveMcpServerOptions({ session, maxImages: 2 });
    expect(resolved).toEqual({
      session,
      name: DEFAULT_SERVER_NAME,
      cwd: process.cwd(),
      notebookTap: undefined,
      tools: resolveKernelToolOptions({ maxImages: 2 }),
    });
    expect(resolveMcpServerOptions({ session, cwd: 'work' }).cwd).toBe(join(process.cwd(), 'work'));
    expect(() => resolveMcpServerOptions({ session, notebookTap: {} as never })).toThrow(/options\.notebookTap/);
    expect(Object.isFrozen(resolved)).toBe(true);
  });
});
