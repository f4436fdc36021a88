import { parseOptions } from '@kernelwarden/core';
import type { KernelSession, SupervisedKernel } from '@kernelwarden/supervisor';
import { z } from 'zod/v3';
import { type KernelToolOptions, type ResolvedKernelToolOptions, resolveKernelToolOptions } from './tool-options.js';

/** The server name announced to MCP clients, unless `name` says otherwise. */
export const DEFAULT_SERVER_NAME = 'kernelwarden';

/** Options of `createMcpServer()`: the session, the server's name, and the tool options. */
export interface McpServerOptions<K extends SupervisedKernel = SupervisedKernel, H = unknown, L extends string = never>
  extends KernelToolOptions {
  /**
   * The session whose kernels the tools run: its Python slot and, when it has one, its R slot. Give it the
   * watchdog as executor (`createWatchdog({ cellTimeoutMs: 0 })` lets `timeout_seconds` be longer than a fixed
   * budget) so that a cell that ignores an interrupt gets its kernel killed and restarted.
   */
  session: KernelSession<K, H, L>;
  /** The server name announced to clients. @defaultValue {@link DEFAULT_SERVER_NAME} */
  name?: string;
}

/** `McpServerOptions` validated, with every default applied. */
export interface ResolvedMcpServerOptions<
  K extends SupervisedKernel = SupervisedKernel,
  H = unknown,
  L extends string = never,
> {
  readonly session: KernelSession<K, H, L>;
  readonly name: string;
  readonly tools: ResolvedKernelToolOptions;
}

const serverSchema = z.object(
  {
    session: z.custom(
      (value) =>
        typeof value === 'object' && value !== null && typeof (value as { execute?: unknown }).execute === 'function',
      'must be a KernelSession',
    ),
    name: z.string().min(1, 'must be a non-empty string').optional(),
  },
  { message: 'must be an object' },
);

/**
 * Validates `createMcpServer()` options and applies their defaults (the tool options' through
 * `resolveKernelToolOptions`); throws `InvalidOptionsError` naming the bad field (`options.session`).
 */
export function resolveMcpServerOptions<K extends SupervisedKernel, H, L extends string>(
  options: McpServerOptions<K, H, L>,
): ResolvedMcpServerOptions<K, H, L> {
  parseOptions(serverSchema, options, { subject: 'MCP server options', root: 'options' });
  const { session, name, ...tools } = options;
  return Object.freeze({ session, name: name ?? DEFAULT_SERVER_NAME, tools: resolveKernelToolOptions(tools) });
}
