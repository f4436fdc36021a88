import type { KernelSession, SupervisedKernel } from '@kernelwarden/supervisor';
import { z } from 'zod/v3';
import type { KernelToolResult } from './cell-transcript.js';
import { type KernelLanguage, KernelTools, type RunCodeInput } from './kernel-tools.js';
import { type KernelToolOptions, resolveKernelToolOptions } from './tool-options.js';
import {
  cancelCellInput,
  checkBackgroundInput,
  restartKernelInput,
  runCodeInput,
  startBackgroundInput,
  TOOL_DESCRIPTIONS,
} from './tool-schemas.js';

/**
 * What a tool result becomes for the model in the AI SDK (a tool result part's `output`): the text, then each image
 * as a file part. Written out here, like `AgentTool`, so that these types need no `ai` installed.
 */
export type ToolResultOutput = {
  type: 'content';
  value: ({ type: 'text'; text: string } | { type: 'file'; mediaType: string; data: { type: 'data'; data: string } })[];
};

/** One AI SDK tool, as its `tool()` returns it: assignable to the AI SDK's `Tool<I, KernelToolResult>`. */
export interface AgentTool<I> {
  description: string;
  inputSchema: z.ZodType<I, z.ZodTypeDef, unknown>;
  execute: (
    input: I,
    options: { toolCallId: string; messages: unknown[]; abortSignal?: AbortSignal | undefined; context?: unknown },
  ) => KernelToolResult | PromiseLike<KernelToolResult>;
  toModelOutput: (options: { toolCallId: string; input: I; output: KernelToolResult }) => ToolResultOutput;
}

/** The AI SDK tools `createAgentTools()` returns, keyed by the names the model sees (a `ToolSet`). */
export type AgentTools = {
  run_code: AgentTool<RunCodeInput>;
  restart_kernel: AgentTool<{ language?: KernelLanguage | undefined }>;
  start_background: AgentTool<{ code: string }>;
  check_background: AgentTool<{ exec_id: string; wait_seconds?: number | undefined }>;
  cancel_cell: AgentTool<{ exec_id: string }>;
};

/**
 * Turns a tool result into the parts the model sees: the text, then each image as a file part.
 *
 * `createAgentTools()` uses it as every tool's `toModelOutput`.
 */
export function toModelOutput(result: KernelToolResult): ToolResultOutput {
  return {
    type: 'content',
    value: result.content.map((item) =>
      item.type === 'text'
        ? { type: 'text' as const, text: item.text }
        : { type: 'file' as const, mediaType: item.mimeType, data: { type: 'data' as const, data: item.data } },
    ),
  };
}

/**
 * Creates Vercel AI SDK tools (`ai` 5 and later; pass them as `tools` to `generateText`/`streamText`) that run code
 * in `session`: the same tools and results as the MCP server's. The call's `abortSignal` interrupts the cell.
 *
 * The objects are what the AI SDK's `tool()` returns (it returns its argument), built here without importing `ai`
 * so that `@kernelwarden/mcp` loads where `ai` is not installed. Throws `InvalidOptionsError` for bad options.
 */
export function createAgentTools<K extends SupervisedKernel, H, L extends string>(
  session: KernelSession<K, H, L>,
  options: KernelToolOptions = {},
): AgentTools {
  const tools = new KernelTools(session, resolveKernelToolOptions(options));
  const modelOutput = ({ output }: { output: KernelToolResult }) => toModelOutput(output);
  return {
    run_code: {
      description: TOOL_DESCRIPTIONS.run_code,
      inputSchema: z.object(runCodeInput),
      execute: (input, { abortSignal }) => tools.runCode(input, { signal: abortSignal }),
      toModelOutput: modelOutput,
    },
    restart_kernel: {
      description: TOOL_DESCRIPTIONS.restart_kernel,
      inputSchema: z.object(restartKernelInput),
      execute: (input, { abortSignal }) => tools.restart(input.language ?? 'python', abortSignal),
      toModelOutput: modelOutput,
    },
    start_background: {
      description: TOOL_DESCRIPTIONS.start_background,
      inputSchema: z.object(startBackgroundInput),
      execute: (input) => tools.startBackground(input.code),
      toModelOutput: modelOutput,
    },
    check_background: {
      description: TOOL_DESCRIPTIONS.check_background,
      inputSchema: z.object(checkBackgroundInput),
      execute: (input, { abortSignal }) => tools.checkBackground(input.exec_id, input.wait_seconds ?? 0, abortSignal),
      toModelOutput: modelOutput,
    },
    cancel_cell: {
      description: TOOL_DESCRIPTIONS.cancel_cell,
      inputSchema: z.object(cancelCellInput),
      execute: (input, { abortSignal }) => tools.cancelCell(input.exec_id, abortSignal),
      toModelOutput: modelOutput,
    },
  };
}
