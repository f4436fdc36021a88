import { type ParseArgsConfig, parseArgs } from 'node:util';
import { UsageError } from './usage-error.js';

type FlagOptions = NonNullable<ParseArgsConfig['options']>;

/** What `parseFlags` answers: node's parsed values and positionals for `options`. */
export type ParsedFlags<O extends FlagOptions> = ReturnType<
  typeof parseArgs<{ args: string[]; options: O; allowPositionals: true; strict: true }>
>;

/** Node's `parseArgs` (strict, positionals allowed) with its errors turned into usage errors that name the flag. */
export function parseFlags<const O extends FlagOptions>(
  command: string,
  args: readonly string[],
  options: O,
): ParsedFlags<O> {
  try {
    return parseArgs({ args: [...args], options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError(describeParseError(error), { command, cause: error });
  }
}

/** Node's parse error, said the way the CLI's other usage errors are. */
function describeParseError(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  // node's messages: "Unknown option '--x'. To specify a positional argument starting with a '-', ..."
  const unknown = /Unknown option '([^']+)'/.exec(message);
  if (unknown) return `unknown option ${unknown[1]}`;
  const missing = /Option '([^']+)' argument missing/.exec(message);
  if (missing) return `${missing[1]?.replace(/^-\w, /, '').replace(/ <value>$/, '')} needs a value`;
  // "Option '--memory' argument is ambiguous": the value starts with a dash (`--memory -1G`).
  const ambiguous = /Option '([^']+)' argument is ambiguous/.exec(message);
  if (ambiguous) {
    const flag = ambiguous[1]?.replace(/^-\w, /, '');
    return `${flag} needs a value, and one that starts with a dash goes as ${flag}=VALUE`;
  }
  return message.split('. ')[0] ?? message;
}
