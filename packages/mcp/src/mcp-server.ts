import { createRequire } from 'node:module';
import { InvalidOptionsError } from '@kernelwarden/core';
import type { KernelSession } from '@kernelwarden/supervisor';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { KernelToolResult } from './cell-transcript.js';
import { KernelTools } from './kernel-tools.js';
import { type KernelToolOptions, resolveKernelToolOptions } from './tool-options.js';
import {
  checkBackgroundInput,
  restartKernelInput,
  runCodeInput,
  startBackgroundInput,
  TOOL_DESCRIPTIONS,
} from './tool-schemas.js';

/** Options of `createMcpServer()`. */
export interface McpServerOptions extends KernelToolOptions {
  /**
   * The session whose kernels the tools run: its Python slot and, when it has one, its R slot. Give it the
   * watchdog as executor (`createWatchdog({ cellTimeoutMs: 0 })` lets `timeout_seconds` be longer than a fixed
   * budget) so that a cell that ignores an interrupt gets its kernel killed and restarted.
   */
  session: KernelSession<any, any>;
  /** The server name announced to clients. @defaultValue 'kernelwarden' */
  name?: string;
}

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
export function createMcpServer(options: McpServerOptions): McpServer {
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionsError([{ path: 'options', message: 'must be an object' }], {
      subject: 'MCP server options',
    });
  }
  const { session, name, ...toolOptions } = options;
  if (session === null || typeof session !== 'object' || typeof session.execute !== 'function') {
    throw new InvalidOptionsError([{ path: 'options.session', message: 'must be a KernelSession' }], {
      subject: 'MCP server options',
    });
  }
  const tools = new KernelTools(session, resolveKernelToolOptions(toolOptions));
  const server = new McpServer({ name: name ?? 'kernelwarden', version: packageVersion() });

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
