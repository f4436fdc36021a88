import type { ParseArgsConfig } from 'node:util';
import type { Command, McpOutputOptions, RunSource } from './command-types.js';
import { parseGateway } from './gateway-args.js';
import { parseFlags } from './parse-flags.js';
import { commandFlags, type FlagConfig, parseStack } from './stack-flags.js';
import { UsageError } from './usage-error.js';

export type {
  Command,
  GatewayAction,
  Language,
  McpOutputOptions,
  NotebookSource,
  RunSource,
  StackOptions,
} from './command-types.js';

const COMMANDS = ['run', 'repl', 'demo', 'mcp', 'doctor', 'gateway', 'help'] as const;

/**
 * Parses and validates a `kernelwarden` command line (without `node` and the script path).
 *
 * Use it to drive the CLI from code or tests; throws `UsageError` with a message that names the bad flag and
 * shows an example. `env` supplies the defaults of the flags that have a variable (`KERNELWARDEN_INTERRUPT_GRACE`,
 * `KERNELWARDEN_KILL_GRACE`, `KERNELWARDEN_MAX_SOURCE_SIZE`, and the limits `KERNELWARDEN_MEMORY`,
 * `KERNELWARDEN_MAX_PROCESSES`, `KERNELWARDEN_CPU_TIME`, `KERNELWARDEN_NO_NETWORK`) and `cwd` the default working
 * directory.
 */
export function parseCommand(
  argv: readonly string[],
  opts: { env?: Record<string, string | undefined>; cwd?: string } = {},
): Command {
  const env = opts.env ?? {};
  const cwd = opts.cwd ?? '.';
  const [first, ...rest] = argv;
  if (first === undefined || first === '--help' || first === '-h') return { command: 'help', topic: undefined };
  if (first === '--version' || first === '-V') return { command: 'version' };
  if (first === 'help') return { command: 'help', topic: rest[0] };
  if (first.startsWith('-')) {
    throw new UsageError(`"${first}" comes before a command: put it after one, e.g. kernelwarden run ${first} …`);
  }
  switch (first) {
    case 'run':
      return parseRun(rest, env, cwd);
    case 'repl':
    case 'demo': {
      const { values, positionals } = parseFlags(first, rest, commandFlags(first));
      if (values.help) return { command: 'help', topic: first };
      if (positionals.length > 0)
        throw new UsageError(`${first} takes no argument: "${positionals[0]}"`, { command: first });
      return { command: first, stack: parseStack(first, values, env, cwd, undefined) };
    }
    case 'doctor': {
      const { values, positionals } = parseFlags('doctor', rest, {
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      });
      if (values.help) return { command: 'help', topic: 'doctor' };
      if (positionals.length > 0)
        throw new UsageError(`doctor takes no argument: "${positionals[0]}"`, { command: 'doctor' });
      return { command: 'doctor', json: values.json === true };
    }
    case 'gateway':
      return parseGateway(rest);
    case 'mcp':
      return parseMcp(rest, env, cwd);
    default: {
      const near = COMMANDS.find((c) => c.startsWith(first.slice(0, 2)));
      throw new UsageError(`unknown command "${first}"${near ? `; did you mean "${near}"?` : ''}`);
    }
  }
}

/** The flags only a notebook takes. */
const NOTEBOOK_FLAGS = {
  output: { type: 'string' },
  inplace: { type: 'boolean' },
  'allow-errors': { type: 'boolean' },
} as const satisfies ParseArgsConfig['options'];

/**
 * Takes `-p NAME VALUE` / `--parameter NAME VALUE` out of `args` (parseArgs reads one value per flag), leaving the
 * values of other flags alone.
 */
function takeParameters(
  args: readonly string[],
  flags: FlagConfig,
): { rest: string[]; parameters: [string, string][] } {
  const takesValue = new Set<string>();
  for (const [name, flag] of Object.entries(flags)) {
    if (flag.type !== 'string') continue;
    takesValue.add(`--${name}`);
    if (flag.short) takesValue.add(`-${flag.short}`);
  }
  const rest: string[] = [];
  const parameters: [string, string][] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '--') {
      rest.push(...args.slice(i));
      break;
    }
    if (arg === '-p' || arg === '--parameter') {
      const name = args[i + 1];
      const value = args[i + 2];
      if (name === undefined || value === undefined) {
        throw new UsageError(`${arg} takes a NAME and a VALUE, e.g. -p alpha 0.6`, { command: 'run' });
      }
      parameters.push([name, value]);
      i += 2;
      continue;
    }
    rest.push(arg);
    if (takesValue.has(arg) && i + 1 < args.length) rest.push(args[++i] as string);
  }
  return { rest, parameters };
}

function parseRun(args: readonly string[], env: Record<string, string | undefined>, cwd: string): Command {
  const flags = { ...commandFlags('run'), code: { type: 'string', short: 'c' }, ...NOTEBOOK_FLAGS } as const;
  const { rest, parameters } = takeParameters(args, flags);
  const { values, positionals } = parseFlags('run', rest, flags);
  if (values.help) return { command: 'help', topic: 'run' };
  const { output, inplace, 'allow-errors': allowErrors, ...stackValues } = values;
  let source: RunSource;
  if (values.code !== undefined) {
    if (positionals.length > 0) {
      throw new UsageError(`give either FILE or -c CODE, not both (got "${positionals[0]}" and -c)`, {
        command: 'run',
      });
    }
    source = { kind: 'code', code: values.code };
  } else if (positionals.length === 1) {
    const path = positionals[0]!;
    source = path === '-' ? { kind: 'stdin' } : { kind: 'file', path };
  } else if (positionals.length === 0) {
    throw new UsageError(
      "nothing to run: give a FILE, - for standard input, or -c CODE, e.g. kernelwarden run -c 'print(1+1)'",
      {
        command: 'run',
      },
    );
  } else {
    throw new UsageError(`run takes one FILE, got ${positionals.length}: ${positionals.join(' ')}`, { command: 'run' });
  }
  if (source.kind === 'file' && /\.ipynb$/i.test(source.path)) {
    if (output !== undefined && inplace) {
      throw new UsageError('give either --output PATH or --inplace, not both', { command: 'run' });
    }
    if (output !== undefined && !/\.ipynb$/i.test(output)) {
      throw new UsageError(`--output ${output} is not a .ipynb path: the executed notebook is written there`, {
        command: 'run',
      });
    }
    if (values.json) {
      throw new UsageError('--json is for scripts: a notebook run writes the executed notebook (--output PATH)', {
        command: 'run',
      });
    }
    const stack = parseStack('run', stackValues, env, cwd, undefined);
    return {
      command: 'run',
      source: {
        kind: 'notebook',
        path: source.path,
        output: inplace ? source.path : output,
        parameters,
        allowErrors: allowErrors === true,
        lang: values.lang === undefined ? undefined : stack.language,
      },
      stack,
    };
  }
  const notebookOnly =
    parameters.length > 0
      ? '-p'
      : output !== undefined
        ? '--output'
        : inplace
          ? '--inplace'
          : allowErrors
            ? '--allow-errors'
            : undefined;
  if (notebookOnly) {
    throw new UsageError(`${notebookOnly} is for notebooks: give a NOTEBOOK.ipynb to run`, { command: 'run' });
  }
  const inferred = source.kind === 'file' && /\.r$/i.test(source.path) ? 'r' : undefined;
  return { command: 'run', source, stack: parseStack('run', stackValues, env, cwd, inferred) };
}

/** `mcp` takes the kernel flags (no --lang, --outputs-dir or --json: the client picks) and the result caps. */
function parseMcp(args: readonly string[], env: Record<string, string | undefined>, cwd: string): Command {
  const kernelFlags = commandFlags('mcp');
  const caps = { 'max-output-chars': 200, 'max-images': 0, 'max-image-bytes': 0 } as const;
  const { values, positionals } = parseFlags('mcp', args, {
    ...kernelFlags,
    'max-output-chars': { type: 'string' },
    'max-images': { type: 'string' },
    'max-image-bytes': { type: 'string' },
  });
  if (values.help) return { command: 'help', topic: 'mcp' };
  if (positionals.length > 0) throw new UsageError(`mcp takes no argument: "${positionals[0]}"`, { command: 'mcp' });
  const output: McpOutputOptions = {};
  const fields = {
    'max-output-chars': 'maxTextChars',
    'max-images': 'maxImages',
    'max-image-bytes': 'maxImageBytes',
  } as const;
  for (const [flag, min] of Object.entries(caps) as [keyof typeof caps, number][]) {
    const text = values[flag];
    if (text === undefined) continue;
    const n = Number(text);
    if (!Number.isInteger(n) || n < min) {
      throw new UsageError(
        `--${flag} "${text}" must be a whole number of at least ${min}, e.g. --${flag} ${min + 10}`,
        {
          command: 'mcp',
        },
      );
    }
    output[fields[flag]] = n;
  }
  const stackValues: Record<string, unknown> = { ...values };
  for (const flag of Object.keys(caps)) delete stackValues[flag];
  return { command: 'mcp', stack: parseStack('mcp', stackValues, env, cwd, undefined), output };
}
