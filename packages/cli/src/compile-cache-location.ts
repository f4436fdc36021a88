import { join } from 'node:path';

/** The commands with a compile cache of their own: each compiles a different part of the CLI. */
const CACHED_COMMANDS = new Set(['run', 'repl', 'demo', 'mcp', 'gateway', 'doctor', 'help', 'version']);

/** The environment variable that turns the compile cache off (`0`). */
export const COMPILE_CACHE_ENV = 'KERNELWARDEN_COMPILE_CACHE';

/**
 * The compile cache of the command `argv` names, in `.compile-cache/` beside the CLI's own files (`dist`): only who
 * may change the CLI may write there. Undefined when `KERNELWARDEN_COMPILE_CACHE=0`.
 */
export function compileCacheFile(
  dist: string,
  argv: readonly string[],
  env: Record<string, string | undefined>,
): string | undefined {
  if (env[COMPILE_CACHE_ENV] === '0') return undefined;
  const first = argv[0] ?? 'help';
  const command = CACHED_COMMANDS.has(first) ? first : 'other';
  return join(dist, '.compile-cache', `${command}.bin`);
}
