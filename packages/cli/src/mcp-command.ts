import type { Readable, Writable } from 'node:stream';
import { createMcpServer, DEFAULT_MAX_MESSAGE_BYTES, McpStdioTransport } from '@kernelwarden/mcp';
import { cellTimeoutFromEnv } from '@kernelwarden/watchdog';
import type { McpOutputOptions, StackOptions } from './args.js';
import type { CliIo } from './cli-io.js';
import { createStack, type Stack } from './compose.js';
import { ExitCode } from './exit-code.js';
import { describeFailure } from './failure.js';
import { DEFAULT_MAX_SOURCE_BYTES } from './source-input.js';

/** Node's largest string, which one message must fit into once read. */
const MAX_MESSAGE_BYTES = 512 * 1024 * 1024 - 1024;

/** The largest message read: the SDK's 10 MiB, or twice the source limit and 1 MiB, whichever is more. */
function messageLimit(maxSourceBytes: number): number {
  return Math.min(MAX_MESSAGE_BYTES, Math.max(DEFAULT_MAX_MESSAGE_BYTES, 2 * maxSourceBytes + 1024 * 1024));
}

/**
 * `kernelwarden mcp`: serves the stack's kernels as MCP tools over stdin/stdout until stdin ends, the transport
 * closes, or SIGTERM/SIGINT arrives; then shuts every kernel down, releases the gateway and resolves 0.
 *
 * stdout carries only the protocol: every human line goes to stderr.
 */
export async function mcpCommand(options: StackOptions, output: McpOutputOptions, io: CliIo): Promise<number> {
  const log = (line: string) => io.stderr.write(`kernelwarden mcp: ${line}\n`);
  let stack: Stack;
  try {
    // The watchdog's own budget is off: each run_code call brings its timeout (timeout_seconds, else --timeout),
    // applied by the tools through the same ladder (interrupt, then kill and restart).
    stack = await createStack(
      { ...options, timeoutMs: 0 },
      {
        env: io.env,
        onNotice: log,
        onKernelStarting: (language) => log(`starting the ${language === 'r' ? 'R' : 'Python'} kernel`),
      },
    );
  } catch (error) {
    const failure = describeFailure(error);
    log(failure.message);
    return failure.exitCode;
  }
  const defaultTimeoutMs = options.timeoutMs ?? cellTimeoutFromEnv(io.env) ?? 0;
  const maxSourceBytes = options.maxSourceBytes ?? DEFAULT_MAX_SOURCE_BYTES;
  const server = createMcpServer({
    session: stack.session,
    cwd: options.cwd,
    defaultTimeoutMs,
    maxSourceBytes,
    ...output,
  });
  // The MCP transport needs the real streams (backpressure on stdout), which processIo() hands over. A message
  // past its limit is answered with an error and the session goes on; the limit leaves room for a source at
  // --max-source-size with JSON's escapes.
  const stdin = io.stdin as unknown as Readable;
  const transport = new McpStdioTransport(stdin, io.stdout as unknown as Writable, {
    maxMessageBytes: messageLimit(maxSourceBytes),
  });

  let finish!: (why: string) => void;
  const finished = new Promise<string>((resolve) => {
    finish = resolve;
  });
  const onEnd = () => finish('stdin closed');
  const onSignal = (signal: NodeJS.Signals) => finish(`${signal} received`);
  stdin.on('end', onEnd);
  stdin.on('close', onEnd);
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  server.server.onclose = () => finish('connection closed');
  try {
    await server.connect(transport);
    log(
      `serving on stdio (gateway ${stack.gateway.embedded ? 'embedded' : stack.gateway.baseUrl}; ` +
        'Python and R start on first use)',
    );
    log(`${await finished}: shutting the kernels down`);
  } finally {
    stdin.off('end', onEnd);
    stdin.off('close', onEnd);
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    await server.close().catch(() => {});
    await stack.close();
    // Nothing more is read: let the process exit although stdin may still be open (a SIGTERM before EOF).
    stdin.destroy?.();
  }
  return ExitCode.ok;
}
