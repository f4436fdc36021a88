import { createRequire } from 'node:module';
import type { SupervisedKernel } from '@kernelwarden/supervisor';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult, ServerNotification } from '@modelcontextprotocol/sdk/types.js';
import type { KernelToolResult } from './cell-transcript.js';
import { KernelTools } from './kernel-tools.js';
import { NotebookTools } from './notebook-tools.js';
import type { ProgressUpdate } from './progress.js';
import { type McpServerOptions, resolveMcpServerOptions } from './server-options.js';
import { KernelTaskStore } from './task-store.js';
import {
  cancelCellInput,
  checkBackgroundInput,
  restartKernelInput,
  runCodeInput,
  runNotebookInput,
  saveNotebookInput,
  startBackgroundInput,
  TOOL_DESCRIPTIONS,
} from './tool-schemas.js';

function packageVersion(): string {
  const require = createRequire(import.meta.url);
  return (require('../package.json') as { version: string }).version;
}

/** The server's `McpServer`: closing it also drops its tasks and their timers. */
class KernelMcpServer extends McpServer {
  readonly #store: KernelTaskStore;

  constructor(name: string, store: KernelTaskStore) {
    super(
      { name, version: packageVersion() },
      {
        capabilities: { tasks: { requests: { tools: { call: {} } }, list: {}, cancel: {} } },
        taskStore: store,
      },
    );
    this.#store = store;
  }

  override async close(): Promise<void> {
    await super.close();
    this.#store.cleanup();
  }
}

/**
 * Creates an MCP server (the SDK's `McpServer`) whose tools run code in `options.session`: `run_code`,
 * `restart_kernel`, `start_background`, `check_background` and `cancel_cell`. While a cell runs it sends
 * `notifications/progress` when the client gave a progress token, and a client's cancellation interrupts the cell.
 * A `run_code` cell still running after `max_wait_seconds` is answered with its output so far and an id
 * (`structuredContent.exec_id`) that `check_background` follows; a client that asks for an MCP task
 * (`params.task`, the specification's experimental tasks) gets one instead, which runs the cell to its end.
 *
 * Connect it to a transport (`await server.connect(new McpStdioTransport())`); closing the server does not
 * close the session — do that yourself. Throws `InvalidOptionsError` for bad options.
 */
export function createMcpServer<K extends SupervisedKernel, H, L extends string>(
  options: McpServerOptions<K, H, L>,
): McpServer {
  const { session, name, cwd, notebookTap, tools: toolOptions } = resolveMcpServerOptions(options);
  const tools = new KernelTools(session, toolOptions);
  const notebooks = new NotebookTools(session, toolOptions, tools.record, { cwd, tap: notebookTap });
  const store = new KernelTaskStore();
  const server = new KernelMcpServer(name, store);
  registerRunCode(server, tools, store);
  registerCellTools(server, tools);
  registerNotebookTools(server, notebooks);
  return server;
}

/**
 * `run_code`, a tool with optional task support: a plain call is answered after `max_wait_seconds` at most, a task
 * the client asks for runs the cell to its end.
 */
function registerRunCode<K extends SupervisedKernel, H, L extends string>(
  server: McpServer,
  tools: KernelTools<K, H, L>,
  store: KernelTaskStore,
): void {
  server.experimental.tasks.registerToolTask(
    'run_code',
    {
      title: 'Run code',
      description: TOOL_DESCRIPTIONS.run_code,
      inputSchema: runCodeInput,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
      execution: { taskSupport: 'optional' },
    },
    {
      createTask: async (input, extra) => {
        const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl, pollInterval: 1000 });
        const onProgress = progressSink(extra);
        if (!store.askedFor(task.taskId)) {
          // A plain call: the SDK reads this task's result as the call's answer; it waits up to max_wait. The
          // result goes to the store itself, so the client hears of no task it did not ask for.
          const result = toCallToolResult(await tools.runCode(input, { signal: extra.signal, onProgress }));
          await store.storeTaskResult(task.taskId, 'completed', result, extra.sessionId);
          return { task: (await store.getTask(task.taskId, extra.sessionId)) ?? task };
        }
        // A task the client asked for: the cell runs to its end; tasks/cancel interrupts it.
        const cancel = new AbortController();
        const result = tools
          .runCode(input, { signal: cancel.signal, onProgress }, { until: 'end' })
          .then(toCallToolResult);
        store.watch(task.taskId, () => cancel.abort(new DOMException('task cancelled', 'AbortError')), result);
        void result
          .then((answer) => extra.taskStore.storeTaskResult(task.taskId, 'completed', answer))
          .catch(() => {
            // The task was cancelled (its result is kept by the store) or has expired.
          });
        return { task };
      },
      getTask: async (_input, extra) => extra.taskStore.getTask(extra.taskId),
      getTaskResult: async (_input, extra) => (await extra.taskStore.getTaskResult(extra.taskId)) as CallToolResult,
    },
  );
}

/** The tools on a session's kernels and cells: `restart_kernel`, `start_background`, `check_background`, `cancel_cell`. */
function registerCellTools<K extends SupervisedKernel, H, L extends string>(
  server: McpServer,
  tools: KernelTools<K, H, L>,
): void {
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
      title: 'Check a running cell',
      description: TOOL_DESCRIPTIONS.check_background,
      inputSchema: checkBackgroundInput,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async (input, extra) =>
      toCallToolResult(
        await tools.checkBackground(input.exec_id, input.wait_seconds ?? 0, extra.signal, progressSink(extra)),
      ),
  );
  server.registerTool(
    'cancel_cell',
    {
      title: 'Cancel a running cell',
      description: TOOL_DESCRIPTIONS.cancel_cell,
      inputSchema: cancelCellInput,
      annotations: { destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    async (input, extra) => toCallToolResult(await tools.cancelCell(input.exec_id, extra.signal)),
  );
}

/** The notebook tools: `run_notebook` and `save_notebook`. */
function registerNotebookTools<K extends SupervisedKernel, H, L extends string>(
  server: McpServer,
  notebooks: NotebookTools<K, H, L>,
): void {
  server.registerTool(
    'run_notebook',
    {
      title: 'Run a notebook',
      description: TOOL_DESCRIPTIONS.run_notebook,
      inputSchema: runNotebookInput,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    },
    async (input, extra) =>
      toCallToolResult(await notebooks.runNotebook(input, { signal: extra.signal, onProgress: progressSink(extra) })),
  );
  server.registerTool(
    'save_notebook',
    {
      title: 'Save the session as a notebook',
      description: TOOL_DESCRIPTIONS.save_notebook,
      inputSchema: saveNotebookInput,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    async (input) => toCallToolResult(await notebooks.saveNotebook(input)),
  );
}

/** Sends progress notifications for the request of `extra`, when it carries a progress token. */
function progressSink(extra: {
  _meta?: { progressToken?: string | number | undefined } | undefined;
  sendNotification: (notification: ServerNotification) => Promise<void>;
}): ((update: ProgressUpdate) => void) | undefined {
  const token = extra._meta?.progressToken;
  if (token === undefined) return undefined;
  return (update) => {
    extra
      .sendNotification({
        method: 'notifications/progress',
        params: { progressToken: token, progress: update.progress, message: update.message },
      })
      .catch(() => {});
  };
}

function toCallToolResult(result: KernelToolResult): CallToolResult {
  return {
    content: result.content,
    isError: result.isError,
    ...(result.structuredContent ? { structuredContent: result.structuredContent } : {}),
  };
}
