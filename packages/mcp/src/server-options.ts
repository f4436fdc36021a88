import { resolve } from 'node:path';
import { parseOptions } from '@kernelwarden/core';
import type { MessageTap } from '@kernelwarden/notebook';
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
  /**
   * The directory `run_notebook` and `save_notebook` resolve relative paths against: give the session's `cwd`.
   * @defaultValue `process.cwd()`
   */
  cwd?: string;
  /**
   * The message tap whose `wrap()` made the session's kernels' WebSocket (`@kernelwarden/notebook`'s
   * `createMessageTap()`): `run_notebook` then records outputs exactly as nbclient does (display updates,
   * `clear_output`, the kernel's timestamps). @defaultValue none
   */
  notebookTap?: MessageTap;
}

/** `McpServerOptions` validated, with every default applied. */
export interface ResolvedMcpServerOptions<
  K extends SupervisedKernel = SupervisedKernel,
  H = unknown,
  L extends string = never,
> {
  readonly session: KernelSession<K, H, L>;
  readonly name: string;
  readonly cwd: string;
  readonly notebookTap: MessageTap | undefined;
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
    cwd: z.string().min(1, 'must be a non-empty string').optional(),
    notebookTap: z
      .custom(
        (value) =>
          typeof value === 'object' && value !== null && typeof (value as { watch?: unknown }).watch === 'function',
        'must be a MessageTap (createMessageTap())',
      )
      .optional(),
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
  const { session, name, cwd, notebookTap, ...tools } = options;
  return Object.freeze({
    session,
    name: name ?? DEFAULT_SERVER_NAME,
    cwd: resolve(cwd ?? process.cwd()),
    notebookTap,
    tools: resolveKernelToolOptions(tools),
  });
}
