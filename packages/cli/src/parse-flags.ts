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
    let message = describeParseError(error);
    const unknown = /^unknown option (--[^=\s]+)/.exec(message);
    const near = unknown ? nearestFlag(unknown[1]!, Object.keys(options)) : undefined;
    if (near) message += `; did you mean --${near}?`;
    throw new UsageError(message, { command, cause: error });
  }
}

/** Edit distance (insertions, deletions, substitutions) between two short strings. */
function distance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

/**
 * The known flag closest to `given` (`--language` → `lang`, `--tiemout` → `timeout`): one whose name starts the
 * given one or is started by it, else the nearest by edit distance within a third of its length. Undefined when
 * none is close.
 */
export function nearestFlag(given: string, known: readonly string[]): string | undefined {
  const name = given.replace(/^-+/, '').toLowerCase();
  if (name.length < 2) return undefined;
  let best: { flag: string; score: number } | undefined;
  for (const flag of known) {
    if (flag === 'help') continue;
    const prefix = name.startsWith(flag) || flag.startsWith(name);
    const d = distance(name, flag);
    const close = d <= Math.max(1, Math.floor(Math.max(name.length, flag.length) / 3));
    if (!prefix && !close) continue;
    // A prefix relation wins over an edit distance of the same size; then the smaller distance.
    const score = d - (prefix ? 0.5 : 0);
    if (!best || score < best.score) best = { flag, score };
  }
  return best?.flag;
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
