import { createRequire } from 'node:module';
import type { SupervisedKernel } from '@kernelwarden/supervisor';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { KernelToolResult } from './cell-transcript.js';
import { KernelTools } from './kernel-tools.js';
import { type McpServerOptions, resolveMcpServerOptions } from './server-options.js';
import {
  checkBackgroundInput,
  restartKernelInput,
  runCodeInput,
  startBackgroundInput,
  TOOL_DESCRIPTIONS,
} from './tool-schemas.js';

function packageVersion(): string {
  const require = createRequire(import.meta.url);
  return (require('../package.json') as { version: string }).version;
}

/**
 * Creates an MCP server (the SDK's `McpServer`) whose tools run code in `options.session`: `run_code`,
 * `restart_kernel`, `start_background` and `check_background`. While a cell runs it sends
 * `notifications/progress` when the client gave a progress token, and a client's cancellation interrupts the cell.
 *
 * Connect it to a transport (`await server.connect(new StdioServerTransport())`); closing the server does not
 * close the session — do that yourself. Throws `InvalidOptionsError` for bad options.
 */
export function createMcpServer<K extends SupervisedKernel, H, L extends string>(
  options: McpServerOptions<K, H, L>,
): McpServer {
  const { session, name, tools: toolOptions } = resolveMcpServerOptions(options);
  const tools = new KernelTools(session, toolOptions);
  const server = new McpServer({ name, version: packageVersion() });

  server.registerTool(
    'run_code',
    {
      title: 'Run code',
      description: TOOL_DESCRIPTIONS.run_code,
      inputSchema: runCodeInput,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    },
    async (input, extra) => {
      const token = extra._meta?.progressToken;
      return toCallToolResult(
        await tools.runCode(input, {
          signal: extra.signal,
          onProgress:
            token === undefined
              ? undefined
              : (update) => {
                  extra
                    .sendNotification({
                      method: 'notifications/progress',
                      params: { progressToken: token, progress: update.progress, message: update.message },
                    })
                    .catch(() => {});
                },
        }),
      );
    },
  );
  server.registerTool(
    'restart_kernel',
    {
      title: 'Restart a kernel',
      description: TOOL_DESCRIPTIONS.restart_kernel,
      inputSchema: restartKernelInput,
      annotations: { destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    async (input, extra) => toCallToolResult(await tools.restart(input.language ?? 'python', extra.signal)),
  );
  server.registerTool(
    'start_background',
    {
      title: 'Start a background cell',
      description: TOOL_DESCRIPTIONS.start_background,
      inputSchema: startBackgroundInput,
      annotations: { destructiveHint: false, openWorldHint: true },
    },
    async (input) => toCallToolResult(tools.startBackground(input.code)),
  );
  server.registerTool(
    'check_background',
    {
      title: 'Check a background cell',
      description: TOOL_DESCRIPTIONS.check_background,
      inputSchema: checkBackgroundInput,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async (input, extra) =>
      toCallToolResult(await tools.checkBackground(input.exec_id, input.wait_seconds ?? 0, extra.signal)),
  );
  return server;
}

function toCallToolResult(result: KernelToolResult): CallToolResult {
  return { content: result.content, isError: result.isError };
}
