import type { Readable, Writable } from 'node:stream';
import { createMcpServer } from '@kernelwarden/mcp';
import { cellTimeoutFromEnv } from '@kernelwarden/watchdog';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { McpOutputOptions, StackOptions } from './args.js';
import type { CliIo } from './cli-io.js';
import { createStack, type Stack } from './compose.js';
import { ExitCode } from './exit-code.js';
import { describeFailure } from './failure.js';

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
        onKernelStarting: (language) => log(`starting the ${language === 'r' ? 'R' : 'Python'} kernel`),
      },
    );
  } catch (error) {
    const failure = describeFailure(error);
    log(failure.message);
    return failure.exitCode;
  }
  const defaultTimeoutMs = options.timeoutMs ?? cellTimeoutFromEnv(io.env) ?? 0;
  const server = createMcpServer({ session: stack.session, defaultTimeoutMs, ...output });
  // The MCP transport needs the real streams (backpressure on stdout), which processIo() hands over.
  const stdin = io.stdin as unknown as Readable;
  const transport = new StdioServerTransport(stdin, io.stdout as unknown as Writable);

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
