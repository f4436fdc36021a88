import { KernelSession } from '@kernelwarden/supervisor';
import { RecordingKernel } from '@kernelwarden/testkit';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { asSchema } from 'ai';
import { describe, expect, it } from 'vitest';
import { createAgentTools } from './agent-tools.js';
import { createMcpServer } from './mcp-server.js';

/** What a model is told run_code takes, in both the MCP tool listing and the AI SDK tool. */
const runCodeJsonSchema = {
  type: 'object',
  properties: {
    code: { type: 'string', description: expect.stringContaining('The code to run') },
    language: { type: 'string', enum: ['python', 'r'], description: expect.stringContaining("'python' (default)") },
    timeout_seconds: { type: 'number', minimum: 0, description: expect.stringContaining('0: no limit') },
  },
  required: ['code'],
};

describe('the tool input schemas', () => {
  it('reach an MCP client as JSON Schema, with every field, its bounds and its description', async () => {
    const session = new KernelSession({ python: () => new RecordingKernel('python') });
    const server = createMcpServer({ session });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const client = new Client({ name: 'test', version: '0' });
    try {
      await client.connect(clientSide);
      const { tools } = await client.listTools();
      const byName = new Map(tools.map((tool) => [tool.name, tool.inputSchema]));
      expect(byName.get('run_code')).toMatchObject(runCodeJsonSchema);
      expect(byName.get('check_background')).toMatchObject({
        properties: { exec_id: { type: 'string' }, wait_seconds: { type: 'number', minimum: 0, maximum: 600 } },
        required: ['exec_id'],
      });
      expect(byName.get('run_notebook')).toMatchObject({
        properties: {
          path: { type: 'string' },
          parameters: { type: 'object' },
          output_path: { type: 'string' },
          allow_errors: { type: 'boolean' },
          timeout_seconds: { type: 'number', exclusiveMinimum: 0 },
        },
        required: ['path'],
      });
      expect(byName.get('save_notebook')).toMatchObject({
        properties: { output_path: { type: 'string' }, language: { enum: ['python', 'r'] } },
        required: ['output_path'],
      });
    } finally {
      await client.close();
      await server.close();
      await session.close();
    }
  });

  it('reach the AI SDK as the same JSON Schema', async () => {
    const session = new KernelSession({ python: () => new RecordingKernel('python') });
    try {
      const tools = createAgentTools(session);
      expect(await asSchema(tools.run_code.inputSchema).jsonSchema).toMatchObject(runCodeJsonSchema);
    } finally {
      await session.close();
    }
  });
});
