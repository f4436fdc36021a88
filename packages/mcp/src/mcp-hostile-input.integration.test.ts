import { GatewayClient, GatewayKernel } from '@kernelwarden/gateway-client';
import { KernelSession } from '@kernelwarden/supervisor';
import { testGateway } from '@kernelwarden/test-env';
import { createWatchdog } from '@kernelwarden/watchdog';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { type CallToolResult, ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMcpServer } from './mcp-server.js';
import { stdioPair } from './stdio-pair.test-fixture.js';
import type { KernelToolOptions } from './tool-options.js';

const textOf = (result: CallToolResult) =>
  result.content
    .filter((c) => c.type === 'text')
    .map((c) => (c as { text: string }).text)
    .join('\n');

const MiB = 1024 * 1024;

/**
 * The server on `McpStdioTransport` (the transport of `kernelwarden mcp`), driven by the SDK's own `Client` over
 * stdio-framed streams, on a session of the test run's real jupyter-server.
 */
async function serve(session: KernelSession, options: KernelToolOptions = {}) {
  const server = createMcpServer({ session, ...options });
  const pair = stdioPair();
  const client = new Client({ name: 'hostile', version: '0' });
  await server.connect(pair.server);
  await client.connect(pair.client);
  const call = async (name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 })) as CallToolResult;
  return {
    call,
    serverErrors: pair.serverErrors,
    close: async () => {
      await client.close();
      await server.close();
    },
  };
}

describe('hostile MCP input, on a real jupyter-server', () => {
  let session: KernelSession;
  beforeAll(() => {
    const gateway = new GatewayClient(testGateway());
    session = new KernelSession({
      python: ({ signal }) => GatewayKernel.start({ gateway, signal }),
      executor: createWatchdog({ cellTimeoutMs: 0 }),
    });
  });
  afterAll(async () => {
    await session.close();
  });

  it('answers a request over the 10 MiB message limit with a JSON-RPC error, and the session keeps its kernel and variables', async () => {
    const mcp = await serve(session);
    try {
      expect((await mcp.call('run_code', { code: 'kept = 6 * 7' })).isError).toBe(false);
      const oversized = mcp.call('run_code', { code: `x = 1\n# ${'y'.repeat(11 * MiB)}` });
      const error = await oversized.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(McpError);
      expect((error as McpError).code).toBe(ErrorCode.InvalidRequest);
      expect((error as McpError).message).toMatch(/larger than this server's limit of 10 MiB .* for one message/);
      expect(mcp.serverErrors.map((e) => e.message)).toEqual([expect.stringContaining('method tools/call')]);
      const after = await mcp.call('run_code', { code: 'print(kept)' });
      expect(after.isError).toBe(false);
      expect(textOf(after)).toContain('42');
      // Twice over: nothing of the first one lingers in the reader.
      await expect(mcp.call('start_background', { code: 'z'.repeat(12 * MiB) })).rejects.toThrow(/for one message/);
      expect(textOf(await mcp.call('run_code', { code: 'kept + 1' }))).toContain('43');
    } finally {
      await mcp.close();
    }
  });

  it('refuses run_code and start_background code over maxSourceBytes with an isError naming the limit, and runs nothing', async () => {
    const mcp = await serve(session, { maxSourceBytes: MiB });
    try {
      const code = `marker = 'ran'\n# ${'y'.repeat(3 * 1000 * 1000)}`;
      const refused = await mcp.call('run_code', { code });
      expect(refused.isError).toBe(true);
      expect(textOf(refused)).toMatch(/larger than this server's source limit of 1 MiB \(1,048,576 bytes\)/);
      expect(textOf(refused)).toContain('nothing was run');
      const background = await mcp.call('start_background', { code });
      expect(background.isError).toBe(true);
      expect(textOf(background)).toMatch(/source limit of 1 MiB/);
      const check = await mcp.call('run_code', { code: "print(globals().get('marker', 'absent'))" });
      expect(textOf(check)).toContain('absent');
      // Just under the limit runs.
      const fits = await mcp.call('run_code', { code: `marker = 'fits'\n# ${'y'.repeat(MiB - 100)}\nprint(marker)` });
      expect(fits.isError, textOf(fits)).toBe(false);
      expect(textOf(fits)).toContain('fits');
    } finally {
      await mcp.close();
    }
  });

  it('applies the 4 MiB default source limit when none is given', async () => {
    const mcp = await serve(session);
    try {
      const refused = await mcp.call('run_code', { code: `# ${'y'.repeat(5 * MiB)}` });
      expect(refused.isError).toBe(true);
      expect(textOf(refused)).toMatch(/source limit of 4 MiB/);
    } finally {
      await mcp.close();
    }
  });

  it('refuses code with a NUL character at once, naming its line, with the kernel and its variables untouched', async () => {
    const mcp = await serve(session);
    try {
      expect((await mcp.call('run_code', { code: 'nul_probe = 1' })).isError).toBe(false);
      const refused = await mcp.call('run_code', { code: 'nul_probe = 2\nprint("a\0b")' });
      expect(refused.isError).toBe(true);
      expect(textOf(refused)).toBe(
        'The code contains a NUL character (line 2): kernels cannot run it; nothing was run.',
      );
      const background = await mcp.call('start_background', { code: '\0' });
      expect(background.isError).toBe(true);
      expect(textOf(background)).toContain('NUL character (line 1)');
      const lone = await mcp.call('run_code', { code: 'nul_probe = 3  # \ud800' });
      expect(lone.isError).toBe(true);
      expect(textOf(lone)).toContain('lone UTF-16 surrogate (line 1)');
      const after = await mcp.call('run_code', { code: 'nul_probe' });
      expect(after.isError).toBe(false);
      expect(textOf(after)).toContain('1');
    } finally {
      await mcp.close();
    }
  });
});
