// Type-checked by `tsc --build`, never run: the tools' own types (written out so that @kernelwarden/mcp's types need
// no `ai` installed) are what the AI SDK takes.
import type { Tool, ToolResultPart, ToolSet } from 'ai';
import { expectTypeOf } from 'vitest';
import type { AgentTools, ToolResultOutput } from './agent-tools.js';
import type { KernelToolResult } from './cell-transcript.js';
import type { RunCodeInput } from './kernel-tools.js';

expectTypeOf<AgentTools>().toExtend<ToolSet>();
expectTypeOf<AgentTools['run_code']>().toExtend<Tool<RunCodeInput, KernelToolResult>>();
expectTypeOf<AgentTools['check_background']>().toExtend<
  Tool<{ exec_id: string; wait_seconds?: number | undefined }, KernelToolResult>
>();
expectTypeOf<ToolResultOutput>().toExtend<ToolResultPart['output']>();
// @ts-expect-error: a tool result in another shape is refused
expectTypeOf<{ type: 'content'; value: { type: 'image' }[] }>().toExtend<ToolResultPart['output']>();
