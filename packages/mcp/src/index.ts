export type { AgentTool, AgentTools, ToolResultOutput } from './agent-tools.js';
export { createAgentTools, toModelOutput } from './agent-tools.js';
export type { KernelToolContent, KernelToolResult } from './cell-transcript.js';
export type { KernelLanguage, RunCodeInput, RunCodeMode } from './kernel-tools.js';
export { KernelTools } from './kernel-tools.js';
export { createMcpServer } from './mcp-server.js';
export type { RunNotebookInput, SaveNotebookInput } from './notebook-tools.js';
export { MAX_RECORDED_BYTES, MAX_RECORDED_CELLS } from './notebook-tools.js';
export type { ProgressUpdate } from './progress.js';
export type { McpServerOptions, ResolvedMcpServerOptions } from './server-options.js';
export { DEFAULT_SERVER_NAME, resolveMcpServerOptions } from './server-options.js';
export { DEFAULT_MAX_SOURCE_BYTES } from './source-check.js';
export type { McpStdioTransportOptions } from './stdio-transport.js';
export { DEFAULT_MAX_MESSAGE_BYTES, McpStdioTransport } from './stdio-transport.js';
export type { KernelToolCall } from './tool-call.js';
export type { KernelToolOptions, ResolvedKernelToolOptions } from './tool-options.js';
export {
  DEFAULT_HEARTBEAT_MS,
  DEFAULT_MAX_IMAGE_BYTES,
  DEFAULT_MAX_IMAGES,
  DEFAULT_MAX_TEXT_CHARS,
  DEFAULT_MAX_WAIT_MS,
  DEFAULT_PROGRESS_INTERVAL_MS,
  DEFAULT_RUN_CODE_TIMEOUT_MS,
  resolveKernelToolOptions,
} from './tool-options.js';
