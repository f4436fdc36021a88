import type { Command } from './args.js';
import type { CliIo } from './cli-io.js';
import { demoCommand } from './demo.js';
import { ExitCode } from './exit-code.js';
import { gatewayCommand } from './gateway-command.js';
import { replCommand } from './repl.js';
import { runCommand } from './run-command.js';

/**
 * Runs the commands that need the kernel stack (`run`, `repl`, `demo`, `mcp`, `gateway`). Loaded on demand, so `help`
 * and `doctor` start without loading the gateway client.
 */
export async function runStackCommand(command: Command, io: CliIo): Promise<number> {
  switch (command.command) {
    case 'run':
      // Loaded for notebooks only: the notebook package is not part of a script's start.
      if (command.source.kind === 'notebook') {
        return (await import('./notebook-command.js')).notebookCommand(command.source, command.stack, io);
      }
      return runCommand(command.source, command.stack, io);
    case 'repl':
      return replCommand(command.stack, io);
    case 'demo':
      return demoCommand(command.stack, io);
    case 'mcp':
      return (await import('./mcp-command.js')).mcpCommand(command.stack, command.output, io);
    case 'gateway':
      return gatewayCommand(command.action, { json: command.json, lines: command.lines, kernel: command.kernel }, io);
    default:
      return ExitCode.internal;
  }
}
