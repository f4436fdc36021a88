import { KernelwardenError } from '@kernelwarden/core';

/**
 * The command line was wrong: an unknown flag, a value that does not parse, a file that does not exist.
 *
 * The CLI prints its message and exits with code 2; `command` names the subcommand whose help to point at.
 */
export class UsageError extends KernelwardenError {
  static override readonly brand: string = 'UsageError';
  /** The subcommand the mistake belongs to (`'run'`), when known. */
  readonly command: string | undefined;

  constructor(message: string, options: { command?: string; cause?: unknown } = {}) {
    super(message, { code: 'USAGE', cause: options.cause });
    this.command = options.command;
  }
}
