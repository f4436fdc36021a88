import type { Command } from './args.js';
import type { CliIo } from './cli-io.js';
import { ExitCode } from './exit-code.js';

/** Runs the commands that need a kernel stack (`run`, `repl`, `demo`, `gateway`). */
export async function runStackCommand(command: Command, io: CliIo): Promise<number> {
  io.stderr.write(`kernelwarden: ${command.command} is not available in this build yet\n`);
  return ExitCode.internal;
}
