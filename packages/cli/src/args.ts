import type { ParseArgsConfig } from 'node:util';
import { z } from 'zod/v3';
import { parseDuration } from './duration.js';
import { parseGateway } from './gateway-args.js';
import { COMMAND_OPTIONS } from './help.js';
import { LIMIT_FLAG_CONFIG, LIMIT_FLAG_ENV, limitFields, limitOptions, parseSwitch } from './limit-flags.js';
import { parseFlags } from './parse-flags.js';
import { parseSize } from './size.js';
import { DEFAULT_MAX_SOURCE_BYTES } from './source-input.js';
import { UsageError } from './usage-error.js';

/** The language a cell runs in. */
export type Language = 'python' | 'r';

/**
 * How to build the kernel stack: shared by `run`, `repl` and `demo`.
 *
 * Every field comes from a flag; `createStack()` takes the same object.
 */
export interface StackOptions {
  /** Language of the first cell (`repl` can switch). @defaultValue `'python'` (`'r'` for a `.R` file) */
  language: Language;
  /** Cell timeout in ms; `0` disables it; `undefined` leaves the watchdog's default (`KERNELWARDEN_CELL_TIMEOUT` or 900 s). */
  timeoutMs: number | undefined;
  /** How long the watchdog waits after interrupting a timed-out cell before it kills the kernel. */
  interruptGraceMs: number | undefined;
  /** How long the watchdog waits after killing before it restarts the kernel. */
  killGraceMs: number | undefined;
  /** Working directory of the kernel. @defaultValue the current directory */
  cwd: string;
  /** Extra environment variables for the kernel (`--env K=V`). */
  env: Record<string, string>;
  /** A remote gateway URL; absent = the embedded local gateway. */
  gatewayUrl: string | undefined;
  /** Name of the environment variable holding the remote gateway's token. @defaultValue `KERNELWARDEN_GATEWAY_TOKEN` */
  tokenEnv: string;
  /** Directories the kernel must not read (`--hide`). */
  hide: string[];
  /** Directories inside hidden ones the kernel may read again (`--allow`). */
  allow: string[];
  /**
   * The Python interpreter of the kernels (`--python PATH`); absent: `VIRTUAL_ENV`'s, else the nearest `.venv`'s,
   * else the gateway's `python3` kernelspec. It must have ipykernel. Embedded gateway only.
   */
  python?: string | undefined;
  /** Where image outputs are saved; absent = not saved. */
  outputsDir: string | undefined;
  /** Most images one cell saves to `outputsDir` (`--max-images`). @defaultValue `DEFAULT_MAX_IMAGES` (100) */
  maxImages?: number | undefined;
  /**
   * Most bytes one cell's images take in `outputsDir`, all together (`--max-images-size`).
   * @defaultValue `DEFAULT_MAX_IMAGES_BYTES` (64 MiB)
   */
  maxImagesBytes?: number | undefined;
  /** Print one JSON document instead of streaming. */
  json: boolean;
  /**
   * The largest source (file, standard input, `-c`, a repl cell) sent to a kernel, in bytes (`--max-source-size`,
   * `KERNELWARDEN_MAX_SOURCE_SIZE`). @defaultValue `DEFAULT_MAX_SOURCE_BYTES` (4 MiB)
   */
  maxSourceBytes?: number;
  /**
   * Memory of each kernel and everything it starts, in bytes (`--memory`, `KERNELWARDEN_MEMORY`): a memory cgroup
   * where one is writable, and `RLIMIT_DATA` on each process, so one allocation past it fails in the cell
   * (`MemoryError`). At least the isolation package's `MIN_MEMORY_BYTES` (256 MiB). @defaultValue no limit
   */
  memoryBytes?: number | undefined;
  /**
   * Processes and threads each kernel may run at once, the sandbox's own included (`--max-processes`,
   * `KERNELWARDEN_MAX_PROCESSES`): a pids cgroup, else `RLIMIT_NPROC` (not as root). At least `MIN_PROCESSES` (16).
   * @defaultValue no limit
   */
  maxProcesses?: number | undefined;
  /**
   * CPU time, in whole seconds, each process of a kernel may use over its whole life (`--cpu-time`,
   * `KERNELWARDEN_CPU_TIME`; `RLIMIT_CPU`): past it the process is killed and the server restarts the kernel.
   * @defaultValue no limit
   */
  cpuSeconds?: number | undefined;
  /**
   * `false` gives each kernel a network namespace with only loopback (`--no-network`, `KERNELWARDEN_NO_NETWORK=1`);
   * it still reaches the embedded gateway. @defaultValue true (the network is shared)
   */
  network?: false | undefined;
}

/** What `run` executes: a file, inline code, standard input (`-`), or a notebook (`.ipynb`). */
export type RunSource =
  | { kind: 'file'; path: string }
  | { kind: 'code'; code: string }
  | { kind: 'stdin' }
  | NotebookSource;

/** `run NOTEBOOK.ipynb`: the notebook and what to do with it. */
export interface NotebookSource {
  kind: 'notebook';
  path: string;
  /** `--output PATH`; `--inplace` sets it to `path`; absent: the executed notebook is not written. */
  output: string | undefined;
  /** `-p NAME VALUE`, in order, the values as typed (read as papermill reads them when the run starts). */
  parameters: [string, string][];
  /** `--allow-errors`: the run goes on after a cell raises. */
  allowErrors: boolean;
  /** `--lang`, when given: overrides the notebook's own language. */
  lang: Language | undefined;
}

/** A parsed command line. */
export type Command =
  | { command: 'help'; topic: string | undefined }
  | { command: 'version' }
  | { command: 'run'; source: RunSource; stack: StackOptions }
  | { command: 'repl'; stack: StackOptions }
  | { command: 'demo'; stack: StackOptions }
  | { command: 'mcp'; stack: StackOptions; output: McpOutputOptions }
  | { command: 'doctor'; json: boolean }
  | { command: 'gateway'; action: GatewayAction; json: boolean; lines: number; kernel?: string | undefined };

/** How `kernelwarden mcp` caps what one tool result carries (absent: the `@kernelwarden/mcp` defaults). */
export interface McpOutputOptions {
  maxTextChars?: number;
  maxImages?: number;
  maxImageBytes?: number;
}

import type { GatewayAction } from './gateway-args.js';

export type { GatewayAction } from './gateway-args.js';

const DURATION_EXAMPLE = 'e.g. 30s, 500ms or 2m';

function durationField(flag: string) {
  return z.string().transform((text, ctx) => {
    const ms = parseDuration(text);
    if (ms === undefined) {
      ctx.addIssue({
        code: 'custom',
        message: `${flag} "${text}" is not a duration: use a number with a unit, ${DURATION_EXAMPLE} (0 turns it off)`,
      });
      return z.NEVER;
    }
    return ms;
  });
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The highest `--max-source-size`: a bigger source would not fit one gateway message or one string. */
const MAX_SOURCE_LIMIT = 256 * 1024 * 1024;

const stackSchema = z.object({
  lang: z
    .string()
    .optional()
    .transform((text, ctx) => {
      if (text === undefined) return undefined;
      const lang = text.toLowerCase();
      if (lang === 'python' || lang === 'py' || lang === 'python3') return 'python' as const;
      if (lang === 'r') return 'r' as const;
      ctx.addIssue({ code: 'custom', message: `--lang "${text}" is not a language: use python or r` });
      return z.NEVER;
    }),
  timeout: durationField('--timeout').optional(),
  'interrupt-grace': durationField('--interrupt-grace').optional(),
  'kill-grace': durationField('--kill-grace').optional(),
  cwd: z.string().min(1, '--cwd needs a directory').optional(),
  env: z
    .array(
      z.string().transform((text, ctx) => {
        const eq = text.indexOf('=');
        const key = eq > 0 ? text.slice(0, eq) : '';
        if (!ENV_NAME.test(key)) {
          ctx.addIssue({ code: 'custom', message: `--env "${text}" is not KEY=VALUE, e.g. --env MPLBACKEND=Agg` });
          return z.NEVER;
        }
        return [key, text.slice(eq + 1)] as const;
      }),
    )
    .default([]),
  gateway: z
    .string()
    .optional()
    .transform((text, ctx) => {
      if (text === undefined) return undefined;
      let url: URL;
      try {
        url = new URL(text);
      } catch {
        ctx.addIssue({ code: 'custom', message: `--gateway "${text}" is not a URL, e.g. http://127.0.0.1:8888` });
        return z.NEVER;
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') {
        ctx.addIssue({
          code: 'custom',
          message: `--gateway must be an http:// or https:// URL, not ${url.protocol}//`,
        });
        return z.NEVER;
      }
      if (url.username || url.password || url.searchParams.has('token')) {
        ctx.addIssue({
          code: 'custom',
          message: '--gateway must not carry credentials: put the token in an environment variable (--token-env)',
        });
        return z.NEVER;
      }
      return url.href.replace(/\/+$/, '');
    }),
  'token-env': z
    .string()
    .regex(ENV_NAME, '--token-env must name an environment variable, e.g. --token-env MY_GATEWAY_TOKEN')
    .optional(),
  hide: z.array(z.string().min(1, '--hide needs a directory')).default([]),
  allow: z.array(z.string().min(1, '--allow needs a directory')).default([]),
  'outputs-dir': z.string().min(1, '--outputs-dir needs a directory').optional(),
  python: z.string().min(1, '--python needs the path of an interpreter, e.g. --python .venv/bin/python').optional(),
  'max-images': z
    .string()
    .optional()
    .transform((text, ctx) => {
      if (text === undefined) return undefined;
      const n = Number(text);
      if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(n)) {
        ctx.addIssue({ code: 'custom', message: `--max-images "${text}" is not a whole number, e.g. --max-images 20` });
        return z.NEVER;
      }
      return n;
    }),
  'max-images-size': z
    .string()
    .optional()
    .transform((text, ctx) => {
      if (text === undefined) return undefined;
      const bytes = parseSize(text);
      if (bytes === undefined) {
        ctx.addIssue({
          code: 'custom',
          message: `--max-images-size "${text}" is not a size, e.g. 512k, 16M or 1G (0 saves none)`,
        });
        return z.NEVER;
      }
      return bytes;
    }),
  json: z.boolean().optional(),
  'max-source-size': z
    .string()
    .optional()
    .transform((text, ctx) => {
      if (text === undefined) return undefined;
      const bytes = parseSize(text);
      if (bytes === undefined || bytes < 1 || bytes > MAX_SOURCE_LIMIT) {
        ctx.addIssue({
          code: 'custom',
          message: `--max-source-size "${text}" is not a size from 1 byte to 256 MiB, e.g. 512k or 16M`,
        });
        return z.NEVER;
      }
      return bytes;
    }),
  ...limitFields,
});

const STACK_FLAGS = {
  lang: { type: 'string', short: 'l' },
  timeout: { type: 'string', short: 't' },
  'interrupt-grace': { type: 'string' },
  'kill-grace': { type: 'string' },
  cwd: { type: 'string' },
  env: { type: 'string', short: 'e', multiple: true },
  gateway: { type: 'string' },
  'token-env': { type: 'string' },
  hide: { type: 'string', multiple: true },
  allow: { type: 'string', multiple: true },
  'outputs-dir': { type: 'string', short: 'o' },
  python: { type: 'string' },
  'max-images': { type: 'string' },
  'max-images-size': { type: 'string' },
  json: { type: 'boolean' },
  'max-source-size': { type: 'string' },
  ...LIMIT_FLAG_CONFIG,
  help: { type: 'boolean', short: 'h' },
} as const satisfies ParseArgsConfig['options'];

type FlagConfig = NonNullable<ParseArgsConfig['options']>;

/**
 * The flags `command` takes (its help lists the same): its options, the limits, and --help. Typed as every stack
 * flag: those it leaves out are simply never set.
 */
function commandFlags(command: keyof typeof COMMAND_OPTIONS): typeof STACK_FLAGS {
  const flags: FlagConfig = {};
  for (const name of COMMAND_OPTIONS[command]) flags[name] = STACK_FLAGS[name as keyof typeof STACK_FLAGS];
  return { ...flags, ...LIMIT_FLAG_CONFIG, help: STACK_FLAGS.help } as typeof STACK_FLAGS;
}

/** Environment variables that stand in for flags (handy in tests and CI). */
const FLAG_ENV = {
  'interrupt-grace': 'KERNELWARDEN_INTERRUPT_GRACE',
  'kill-grace': 'KERNELWARDEN_KILL_GRACE',
  'max-source-size': 'KERNELWARDEN_MAX_SOURCE_SIZE',
  memory: LIMIT_FLAG_ENV.memory,
  'max-processes': LIMIT_FLAG_ENV['max-processes'],
  'cpu-time': LIMIT_FLAG_ENV['cpu-time'],
} as const;

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

function parseStack(
  command: string,
  values: Record<string, unknown>,
  env: Record<string, string | undefined>,
  cwd: string,
  inferredLanguage: Language | undefined,
): StackOptions {
  const raw: Record<string, unknown> = { ...values };
  delete raw.help;
  delete raw.code;
  const fromEnv = new Map<string, string>();
  for (const [flag, variable] of Object.entries(FLAG_ENV)) {
    const value = env[variable];
    if (raw[flag] === undefined && value !== undefined && value !== '') {
      raw[flag] = value;
      fromEnv.set(flag, variable);
    }
  }
  const noNetwork = env[LIMIT_FLAG_ENV['no-network']];
  if (raw['no-network'] === undefined && noNetwork !== undefined && noNetwork !== '') {
    const on = parseSwitch(LIMIT_FLAG_ENV['no-network'], noNetwork);
    if (typeof on !== 'boolean') throw new UsageError(on.problem, { command });
    raw['no-network'] = on;
  }
  const parsed = stackSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    let message = issue.message;
    const flag = String(issue.path[0] ?? '');
    const variable = fromEnv.get(flag);
    if (variable) message = message.replace(`--${flag}`, variable);
    else if (flag && !message.startsWith('--')) message = `--${flag}: ${message}`;
    throw new UsageError(message, { command, cause: parsed.error });
  }
  const v = parsed.data;
  if (v.allow.length > 0 && v.hide.length === 0) {
    throw new UsageError('--allow re-opens a directory inside a hidden one: give the --hide DIR it belongs to', {
      command,
    });
  }
  return {
    language: v.lang ?? inferredLanguage ?? 'python',
    timeoutMs: v.timeout,
    interruptGraceMs: v['interrupt-grace'],
    killGraceMs: v['kill-grace'],
    cwd: v.cwd ?? cwd,
    env: Object.fromEntries(v.env),
    gatewayUrl: v.gateway,
    tokenEnv: v['token-env'] ?? 'KERNELWARDEN_GATEWAY_TOKEN',
    hide: v.hide,
    allow: v.allow,
    outputsDir: v['outputs-dir'],
    ...(v.python === undefined ? {} : { python: v.python }),
    ...(v['max-images'] === undefined ? {} : { maxImages: v['max-images'] }),
    ...(v['max-images-size'] === undefined ? {} : { maxImagesBytes: v['max-images-size'] }),
    json: v.json === true,
    maxSourceBytes: v['max-source-size'] ?? DEFAULT_MAX_SOURCE_BYTES,
    ...limitOptions(v),
  };
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
