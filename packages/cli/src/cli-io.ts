import type { TextSink } from './output-printer.js';

/**
 * Everything the CLI touches of its process: its streams, environment and working directory.
 *
 * `main()` takes one so that tests and embedders can run commands without a real terminal.
 */
export interface CliIo {
  stdout: TextSink;
  stderr: TextSink;
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  env: Record<string, string | undefined>;
  cwd: string;
}

/** The real process. */
export function processIo(): CliIo {
  return { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env, cwd: process.cwd() };
}
