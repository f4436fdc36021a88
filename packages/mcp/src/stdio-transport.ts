import process from 'node:process';
import type { Readable, Writable } from 'node:stream';
import { deserializeMessage, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, type JSONRPCMessage, type RequestId } from '@modelcontextprotocol/sdk/types.js';
import { formatBytes } from './source-check.js';

/** The largest message (one line of JSON) the stdio transport reads: 10 MiB, the SDK's own stdio limit. */
export const DEFAULT_MAX_MESSAGE_BYTES = 10 * 1024 * 1024;

/** Options of `McpStdioTransport`. */
export interface McpStdioTransportOptions {
  /** The largest message read; a longer line is answered with an error. @defaultValue {@link DEFAULT_MAX_MESSAGE_BYTES} */
  maxMessageBytes?: number;
}

/**
 * The MCP stdio transport of `kernelwarden mcp`: newline-delimited JSON-RPC on a readable and a writable stream
 * (stdin and stdout by default), as the SDK's `StdioServerTransport`, with what a hostile or careless client
 * sends kept to one message:
 *
 * - a line longer than `maxMessageBytes` is not buffered past the limit; it is read to its end, and a request is
 *   answered with a JSON-RPC error (`-32600`, its size and the limit) under its own id. The connection and the
 *   session go on (the SDK's transport closes the whole connection instead);
 * - a line that is not JSON, or not a JSON-RPC message, is answered the same way when its id can be found
 *   (`-32700` / `-32600`), and reported through `onerror`.
 *
 * Each message is parsed with the SDK's own `deserializeMessage`.
 */
export class McpStdioTransport implements Transport {
  onclose?: (() => void) | undefined;
  onerror?: ((error: Error) => void) | undefined;
  onmessage?: (<T extends JSONRPCMessage>(message: T) => void) | undefined;

  readonly #stdin: Readable;
  readonly #stdout: Writable;
  readonly #max: number;
  #started = false;
  #closed = false;
  /** The pieces of the line being read while it fits the limit. */
  #pieces: Buffer[] = [];
  #length = 0;
  /** Set once the line being read is past the limit: only its id is looked for from then on. */
  #oversized: JsonRpcIdScanner | undefined;

  constructor(
    stdin: Readable = process.stdin,
    stdout: Writable = process.stdout,
    options: McpStdioTransportOptions = {},
  ) {
    this.#stdin = stdin;
    this.#stdout = stdout;
    const max = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    if (!Number.isSafeInteger(max) || max < 1024) {
      throw new RangeError(`maxMessageBytes must be a whole number of at least 1024, got ${String(max)}`);
    }
    this.#max = max;
  }

  async start(): Promise<void> {
    if (this.#started) throw new Error('McpStdioTransport already started');
    this.#started = true;
    this.#stdin.on('data', this.#onData);
    this.#stdin.on('error', this.#onStreamError);
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve) => {
      if (this.#stdout.write(serializeMessage(message))) resolve();
      else this.#stdout.once('drain', resolve);
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#stdin.off('data', this.#onData);
    this.#stdin.off('error', this.#onStreamError);
    if (this.#stdin.listenerCount('data') === 0) this.#stdin.pause();
    this.#pieces = [];
    this.#length = 0;
    this.#oversized = undefined;
    this.onclose?.();
  }

  readonly #onStreamError = (error: Error) => this.onerror?.(error);

  readonly #onData = (data: Buffer | string) => {
    const chunk = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    let start = 0;
    while (start < chunk.length && !this.#closed) {
      const newline = chunk.indexOf(0x0a, start);
      const end = newline === -1 ? chunk.length : newline;
      this.#take(chunk.subarray(start, end));
      if (newline === -1) break;
      this.#endLine();
      start = newline + 1;
    }
  };

  #take(piece: Buffer): void {
    if (piece.length === 0) return;
    if (this.#oversized) {
      this.#oversized.scan(piece);
      return;
    }
    if (this.#length + piece.length <= this.#max) {
      // A copy: the stream may reuse its buffer, and a small piece must not pin a large chunk.
      this.#pieces.push(Buffer.from(piece));
      this.#length += piece.length;
      return;
    }
    const scanner = new JsonRpcIdScanner();
    for (const held of this.#pieces) scanner.scan(held);
    scanner.scan(piece);
    this.#pieces = [];
    this.#length = 0;
    this.#oversized = scanner;
  }

  #endLine(): void {
    const oversized = this.#oversized;
    this.#oversized = undefined;
    if (oversized) {
      const message =
        `The message is ${formatBytes(oversized.bytes)}, larger than this server's limit of ` +
        `${formatBytes(this.#max)} for one message: it was not read, and the session goes on.`;
      this.#refuse(oversized, ErrorCode.InvalidRequest, message, { size: oversized.bytes, limit: this.#max });
      return;
    }
    const bytes = this.#pieces.length === 1 ? this.#pieces[0]! : Buffer.concat(this.#pieces, this.#length);
    this.#pieces = [];
    this.#length = 0;
    const line = bytes.toString('utf8').replace(/\r$/, '');
    if (line.trim().length === 0) return;
    let message: JSONRPCMessage;
    try {
      message = deserializeMessage(line);
    } catch (error) {
      const scanner = new JsonRpcIdScanner();
      scanner.scan(bytes);
      const notJson = error instanceof SyntaxError;
      this.#refuse(
        scanner,
        notJson ? ErrorCode.ParseError : ErrorCode.InvalidRequest,
        notJson ? 'The message is not valid JSON.' : 'The message is not a valid JSON-RPC message.',
        undefined,
        error,
      );
      return;
    }
    this.onmessage?.(message);
  }

  /** Reports a message that cannot be handled, and answers it when it is a request whose id was found. */
  #refuse(
    scanner: JsonRpcIdScanner,
    code: number,
    message: string,
    data: Record<string, unknown> | undefined,
    cause?: unknown,
  ): void {
    const id = scanner.id;
    const method = scanner.method;
    this.onerror?.(
      new Error(`${message}${method ? ` (method ${method})` : ''}`, cause === undefined ? undefined : { cause }),
    );
    if (id === undefined) return;
    this.send({ jsonrpc: '2.0', id, error: { code, message, ...(data ? { data } : {}) } }).catch((error) =>
      this.onerror?.(error instanceof Error ? error : new Error(String(error))),
    );
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
/** Most bytes of a top-level key or of an `id`/`method` value kept: a longer one is not one we look for. */
const MAX_CAPTURE = 512;

/**
 * Finds the top-level `id` and `method` of a JSON-RPC message in streamed bytes, in constant memory: strings and
 * nested values are skipped without being kept, so a 1 GiB line costs nothing but the scan.
 */
export class JsonRpcIdScanner {
  /** Bytes scanned. */
  bytes = 0;
  #depth = 0;
  #inString = false;
  #escaped = false;
  #expectKey = false;
  /** What the string or scalar being read is: a top-level key, a top-level value we keep, or something else. */
  #capturing: 'key' | 'value' | undefined;
  #capture: number[] = [];
  #captureOverflow = false;
  #key: string | undefined;
  /** The top-level key whose value is being read, when it is one we keep. */
  #valueOf: 'id' | 'method' | undefined;
  #rawId: string | undefined;
  #rawMethod: string | undefined;

  /** The request id (a string or an integer), when one was found. */
  get id(): RequestId | undefined {
    if (this.#valueOf === 'id') this.#finishValue();
    return parseId(this.#rawId);
  }

  /** The method, when one was found. */
  get method(): string | undefined {
    if (this.#rawMethod === undefined) return undefined;
    try {
      const value: unknown = JSON.parse(this.#rawMethod);
      return typeof value === 'string' ? value : undefined;
    } catch {
      return undefined;
    }
  }

  scan(bytes: Uint8Array): void {
    this.bytes += bytes.length;
    for (let i = 0; i < bytes.length; i++) {
      const b = bytes[i]!;
      if (this.#inString) {
        if (this.#capturing) this.#keep(b);
        if (this.#escaped) this.#escaped = false;
        else if (b === BACKSLASH) this.#escaped = true;
        else if (b === QUOTE) {
          this.#inString = false;
          if (this.#capturing === 'key') {
            this.#key = this.#captured();
            this.#capturing = undefined;
          } else if (this.#capturing === 'value') this.#finishValue();
        }
        continue;
      }
      switch (b) {
        case QUOTE:
          this.#inString = true;
          if (this.#depth === 1 && this.#expectKey) this.#startCapture('key');
          else if (this.#depth === 1 && this.#valueOf && !this.#capturing) this.#startCapture('value');
          if (this.#capturing) this.#keep(b);
          break;
        case 0x7b: // {
        case 0x5b: // [
          if (this.#depth === 1 && this.#capturing === 'value') this.#abandonValue();
          this.#depth++;
          if (this.#depth === 1) this.#expectKey = b === 0x7b;
          break;
        case 0x7d: // }
        case 0x5d: // ]
          if (this.#depth === 1 && this.#capturing === 'value') this.#finishValue();
          this.#depth = Math.max(0, this.#depth - 1);
          break;
        case 0x3a: // :
          if (this.#depth === 1) {
            this.#expectKey = false;
            this.#valueOf = this.#key === 'id' || this.#key === 'method' ? this.#key : undefined;
            this.#key = undefined;
          }
          break;
        case 0x2c: // ,
          if (this.#depth === 1) {
            if (this.#capturing === 'value') this.#finishValue();
            this.#expectKey = true;
            this.#valueOf = undefined;
          }
          break;
        case 0x20:
        case 0x09:
        case 0x0d:
        case 0x0a:
          if (this.#depth === 1 && this.#capturing === 'value') this.#finishValue();
          break;
        default:
          // A scalar (number, true, false, null) as a value we keep.
          if (this.#depth === 1 && this.#valueOf) {
            if (!this.#capturing) this.#startCapture('value');
            this.#keep(b);
          }
      }
    }
  }

  #startCapture(what: 'key' | 'value'): void {
    this.#capturing = what;
    this.#capture = [];
    this.#captureOverflow = false;
  }

  #keep(b: number): void {
    if (this.#capture.length >= MAX_CAPTURE) this.#captureOverflow = true;
    else this.#capture.push(b);
  }

  #captured(): string | undefined {
    if (this.#captureOverflow) return undefined;
    const raw = Buffer.from(this.#capture).toString('utf8');
    if (this.#capturing === 'value') return raw;
    try {
      const key: unknown = JSON.parse(raw);
      return typeof key === 'string' ? key : undefined;
    } catch {
      return undefined;
    }
  }

  #finishValue(): void {
    if (this.#capturing !== 'value') return;
    const raw = this.#captured();
    if (this.#valueOf === 'id') this.#rawId = raw;
    else if (this.#valueOf === 'method') this.#rawMethod = raw;
    this.#capturing = undefined;
    this.#valueOf = undefined;
  }

  #abandonValue(): void {
    this.#capturing = undefined;
    this.#valueOf = undefined;
  }
}

function parseId(raw: string | undefined): RequestId | undefined {
  if (raw === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(raw);
    if (typeof value === 'string') return value;
    if (typeof value === 'number' && Number.isSafeInteger(value)) return value;
  } catch {
    // not an id
  }
  return undefined;
}
