import { PassThrough } from 'node:stream';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { McpStdioTransport, type McpStdioTransportOptions } from './stdio-transport.js';

/**
 * A client transport framed as the SDK's stdio client's (one JSON line per message, the SDK's `ReadBuffer` on the
 * way back, no read limit), writing to the server's stdin stream and reading its stdout stream: the SDK's `Client`
 * talks to `McpStdioTransport` byte for byte as over a child process's pipes, in one process.
 */
export class StreamClientTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  readonly #toServer: PassThrough;
  readonly #fromServer: PassThrough;
  readonly #buffer = new ReadBuffer({ maxBufferSize: Number.MAX_SAFE_INTEGER });
  /** Every raw line written: what a test sends besides the client's own requests. */
  readonly write: (line: string | Buffer) => void;

  constructor(toServer: PassThrough, fromServer: PassThrough) {
    this.#toServer = toServer;
    this.#fromServer = fromServer;
    this.write = (line) => void this.#toServer.write(line);
  }

  async start(): Promise<void> {
    this.#fromServer.on('data', (chunk: Buffer) => {
      this.#buffer.append(chunk);
      for (;;) {
        let message: JSONRPCMessage | null;
        try {
          message = this.#buffer.readMessage();
        } catch (error) {
          this.onerror?.(error as Error);
          continue;
        }
        if (message === null) break;
        this.onmessage?.(message);
      }
    });
  }

  async send(message: JSONRPCMessage): Promise<void> {
    this.#toServer.write(serializeMessage(message));
  }

  async close(): Promise<void> {
    this.#toServer.end();
    this.onclose?.();
  }
}

/** A server transport (`McpStdioTransport` on two streams) and the client transport talking to it. */
export function stdioPair(options: McpStdioTransportOptions = {}): {
  server: McpStdioTransport;
  client: StreamClientTransport;
  serverErrors: Error[];
} {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const server = new McpStdioTransport(stdin, stdout, options);
  const serverErrors: Error[] = [];
  server.onerror = (error) => serverErrors.push(error);
  return { server, client: new StreamClientTransport(stdin, stdout), serverErrors };
}
