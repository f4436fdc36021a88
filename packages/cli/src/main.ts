import { createRequire } from 'node:module';
import { type Command, parseCommand } from './args.js';
import { type CliIo, processIo } from './cli-io.js';
import { ExitCode } from './exit-code.js';
import { helpText } from './help.js';
import { terminalSafe } from './terminal-text.js';
import { UsageError } from './usage-error.js';

function version(): string {
  const require = createRequire(import.meta.url);
  return (require('../package.json') as { version: string }).version;
}

/**
 * Runs one `kernelwarden` command line and resolves with its exit code; never calls `process.exit`.
 *
 * `kernelwarden` (`dist/bin.cjs`) calls it with `process.argv.slice(2)`; call it yourself to embed the CLI.
 */
export async function main(argv: readonly string[], io: CliIo = processIo()): Promise<number> {
  let command: Command;
  try {
    command = parseCommand(argv, { env: io.env, cwd: io.cwd });
  } catch (error) {
    if (!UsageError.isInstance(error)) throw error;
    const where = error.command ? ` ${error.command}` : '';
    // The message may quote an argument: a file name from a glob can hold escape sequences.
    const message = terminalSafe(error.message, { colors: false });
    io.stderr.write(`kernelwarden${where}: ${message}\nRun 'kernelwarden help${where}' for usage.\n`);
    return ExitCode.usage;
  }
  switch (command.command) {
    case 'help':
      io.stdout.write(`${helpText(command.topic)}\n`);
      return ExitCode.ok;
    case 'version':
      io.stdout.write(`${version()}\n`);
      return ExitCode.ok;
    case 'doctor': {
      // Loaded for this command only: the isolation package it probes with is not needed by the others' start.
      const { doctorCommand } = await import('./doctor.js');
      return doctorCommand(command.json, io);
    }
    default: {
      const { runStackCommand } = await import('./stack-commands.js');
      return runStackCommand(command, io);
    }
  }
}
