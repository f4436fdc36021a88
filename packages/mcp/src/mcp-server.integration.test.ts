import { GatewayClient, GatewayKernel } from '@kernelwarden/gateway-client';
import { createRSlot, startIRKernel } from '@kernelwarden/r-kernel';
import { KernelSession } from '@kernelwarden/supervisor';
import { testGateway } from '@kernelwarden/test-env';
import { createWatchdog } from '@kernelwarden/watchdog';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { createMcpServer } from './mcp-server.js';

const textOf = (result: CallToolResult) =>
  result.content
    .filter((c) => c.type === 'text')
    .map((c) => (c as { text: string }).text)
    .join('\n');

describe('createMcpServer on a real jupyter-server', () => {
  it('answers an R call with a clear isError when R cannot start, and Python keeps working', async () => {
    const { baseUrl, token } = testGateway();
    const gateway = new GatewayClient({ baseUrl, token });
    const session = new KernelSession({
      python: ({ signal }) => GatewayKernel.start({ gateway, signal }),
      // A kernelspec the server does not have: the R slot soft-fails instead of throwing.
      r: createRSlot({ spawn: ({ signal }) => startIRKernel({ gateway, kernelName: 'no-such-r', signal }) }),
      executor: createWatchdog({ cellTimeoutMs: 0 }),
    });
    const server = createMcpServer({ session });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const client = new Client({ name: 'test', version: '0' });
    try {
      await server.connect(serverSide);
      await client.connect(clientSide);
      const call = async (args: Record<string, unknown>) =>
        (await client.callTool({ name: 'run_code', arguments: args }, undefined, {
          timeout: 60_000,
        })) as CallToolResult;
      expect((await call({ code: 'kept = 6 * 7' })).isError).toBe(false);
      const r = await call({ code: 'cat(1)', language: 'r' });
      expect(r.isError).toBe(true);
      expect(textOf(r)).toMatch(/R kernel unavailable/);
      expect(textOf(r)).toContain('Python cells are not affected');
      const python = await call({ code: 'kept' });
      expect(python.isError).toBe(false);
      expect(textOf(python)).toContain('42');
    } finally {
      await client.close();
      await server.close();
      await session.close();
    }
  });
});
