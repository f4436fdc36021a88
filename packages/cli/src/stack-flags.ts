import type { ParseArgsConfig } from 'node:util';
import { z } from 'zod/v3';
import type { Language, StackOptions } from './command-types.js';
import { parseDuration } from './duration.js';
import { COMMAND_OPTIONS } from './help.js';
import { LIMIT_FLAG_CONFIG, LIMIT_FLAG_ENV, limitFields, limitOptions, parseSwitch } from './limit-flags.js';
import { parseSize } from './size.js';
import { DEFAULT_MAX_SOURCE_BYTES } from './source-input.js';
import { UsageError } from './usage-error.js';

// The flags every command that starts kernels takes, their environment variables, and their checks (`StackOptions`).

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

export const STACK_FLAGS = {
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

export type FlagConfig = NonNullable<ParseArgsConfig['options']>;

/**
 * The flags `command` takes (its help lists the same): its options, the limits, and --help. Typed as every stack
 * flag: those it leaves out are simply never set.
 */
export function commandFlags(command: keyof typeof COMMAND_OPTIONS): typeof STACK_FLAGS {
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

/**
 * Checks the stack flags `values` of `command` (those unset taken from `env`'s variables) into `StackOptions`:
 * throws `UsageError` naming the bad flag, or the variable it came from.
 */
export function parseStack(
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
