import { PassThrough } from 'node:stream';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { JsonRpcIdScanner, McpStdioTransport } from './stdio-transport.js';

function scan(text: string, chunk = text.length): JsonRpcIdScanner {
  const scanner = new JsonRpcIdScanner();
  const bytes = Buffer.from(text, 'utf8');
  for (let i = 0; i < bytes.length; i += chunk) scanner.scan(bytes.subarray(i, i + chunk));
  return scanner;
}

describe('JsonRpcIdScanner', () => {
  it('finds the top-level id wherever it is, as the SDK client writes it (last) or first', () => {
    const big = 'x'.repeat(5000);
    const sdkOrder = `{"method":"tools/call","params":{"name":"run_code","arguments":{"code":"${big}","id":99}},"jsonrpc":"2.0","id":7}`;
    expect(scan(sdkOrder).id).toBe(7);
    expect(scan(sdkOrder).method).toBe('tools/call');
    expect(scan(sdkOrder, 1).id).toBe(7);
    expect(scan(sdkOrder, 13).id).toBe(7);
    expect(scan(`{"jsonrpc":"2.0","id":"req \\"1\\"","method":"x","params":{"id":3}}`, 3).id).toBe('req "1"');
    expect(scan(`{ "id" : 12 , "params": [1, {"id": 4}] }`).id).toBe(12);
  });

  it('skips ids inside strings and nested values, and finds none in a notification or a broken line', () => {
    expect(scan(`{"method":"notifications/cancelled","params":{"requestId":1,"id":2},"x":"\\"id\\":5"}`).id).toBe(
      undefined,
    );
    expect(scan(`{"jsonrpc":"2.0","method":"x","params":{"code":"${'a'.repeat(100)}`).id).toBe(undefined);
    expect(scan(`{"id":{"a":1},"method":"x"}`).id).toBe(undefined);
    expect(scan(`{"id":1.5}`).id).toBe(undefined);
    expect(scan(`{"id":"${'9'.repeat(2000)}"}`).id).toBe(undefined);
  });
});

/** A transport on two streams, with what it delivers, reports and writes. */
function harness(maxMessageBytes = 1024) {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const transport = new McpStdioTransport(stdin, stdout, { maxMessageBytes });
  const messages: JSONRPCMessage[] = [];
  const errors: Error[] = [];
  let written = '';
  stdout.on('data', (chunk: Buffer) => {
    written += chunk.toString('utf8');
  });
  transport.onmessage = (message) => messages.push(message);
  transport.onerror = (error) => errors.push(error);
  let closed = false;
  transport.onclose = () => {
    closed = true;
  };
  return {
    transport,
    stdin,
    messages,
    errors,
    replies: () =>
      written
        .split('\n')
        .filter((line) => line.length > 0)
        .map((line) => JSON.parse(line) as { id?: unknown; error?: { code: number; message: string; data?: unknown } }),
    closed: () => closed,
  };
}

const request = (id: number, code: string) =>
  `${JSON.stringify({ method: 'tools/call', params: { name: 'run_code', arguments: { code } }, jsonrpc: '2.0', id })}\n`;

describe('McpStdioTransport', () => {
  it('answers a request past the limit with an error under its id, in any chunking, and reads the next message', async () => {
    for (const chunk of [1, 100, 64 * 1024]) {
      const h = harness(1024);
      await h.transport.start();
      const line = Buffer.from(request(5, 'y'.repeat(4000)) + request(6, 'print(1)'));
      for (let i = 0; i < line.length; i += chunk) h.stdin.write(line.subarray(i, i + chunk));
      await new Promise((resolve) => setImmediate(resolve));
      const replies = h.replies();
      expect(replies, JSON.stringify(replies).slice(0, 600)).toHaveLength(1);
      expect(replies[0]).toMatchObject({ id: 5, error: { code: -32600, data: { limit: 1024 } } });
      expect(replies[0]!.error!.message).toMatch(/larger than this server's limit of 1 KiB \(1,024 bytes\)/);
      expect(h.messages).toEqual([JSON.parse(request(6, 'print(1)'))]);
      expect(h.errors.map((e) => e.message)).toEqual([expect.stringContaining('(method tools/call)')]);
      expect(h.closed()).toBe(false);
      await h.transport.close();
    }
  });

  it('answers a line that is not JSON, or not JSON-RPC, when its id can be found, and goes on', async () => {
    const h = harness();
    await h.transport.start();
    h.stdin.write('{"jsonrpc":"2.0","id":3,"method":"x",,}\n');
    h.stdin.write('{"jsonrpc":"1.0","id":4}\n\n');
    h.stdin.write('not json at all\n');
    h.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\r\n');
    await new Promise((resolve) => setImmediate(resolve));
    expect(h.replies()).toMatchObject([
      { id: 3, error: { code: -32700 } },
      { id: 4, error: { code: -32600 } },
    ]);
    expect(h.errors).toHaveLength(3);
    expect(h.messages).toEqual([{ jsonrpc: '2.0', method: 'notifications/initialized' }]);
    await h.transport.close();
    expect(h.closed()).toBe(true);
  });

  it('the SDK transport, given the same request, closes the whole connection (the reason this one exists)', async () => {
    const stdin = new PassThrough();
    const sdk = new StdioServerTransport(stdin, new PassThrough());
    let closed = false;
    sdk.onclose = () => {
      closed = true;
    };
    sdk.onerror = () => {};
    await sdk.start();
    stdin.write(request(1, 'z'.repeat(11 * 1024 * 1024)));
    await new Promise((resolve) => setImmediate(resolve));
    expect(closed).toBe(true);
  });

  it('refuses a limit below 1 KiB', () => {
    expect(() => new McpStdioTransport(new PassThrough(), new PassThrough(), { maxMessageBytes: 10 })).toThrow(
      /maxMessageBytes/,
    );
  });
});
