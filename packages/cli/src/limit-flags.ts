import { InvalidOptionsError } from '@kernelwarden/core';
import type { KernelLimits } from '@kernelwarden/isolation';
import { z } from 'zod/v3';
import type { StackOptions } from './command-types.js';
import { parseDuration } from './duration.js';
import { isolation } from './isolation.js';
import { parseSize } from './size.js';

/** The resource and network limit flags every command that starts kernels takes. */
export const LIMIT_FLAG_CONFIG = {
  memory: { type: 'string' },
  'max-processes': { type: 'string' },
  'cpu-time': { type: 'string' },
  'no-network': { type: 'boolean' },
} as const;

/** The environment variables that stand in for the limit flags (as `KERNELWARDEN_KILL_GRACE` does for its flag). */
export const LIMIT_FLAG_ENV = {
  memory: 'KERNELWARDEN_MEMORY',
  'max-processes': 'KERNELWARDEN_MAX_PROCESSES',
  'cpu-time': 'KERNELWARDEN_CPU_TIME',
  'no-network': 'KERNELWARDEN_NO_NETWORK',
} as const;

/** The flag that sets each limit, for messages. */
export const LIMIT_FLAG_NAMES: Readonly<Record<keyof KernelLimits, string>> = {
  memoryBytes: '--memory',
  maxProcesses: '--max-processes',
  cpuSeconds: '--cpu-time',
  network: '--no-network',
};

/**
 * The isolation package's own verdict on a limit value (its minimums and maximums live there): its message when it
 * refuses the value, else undefined. A limits-only policy involves no directory but the system temporary one, which
 * plays no part in it: `/` stands in for it so the check never depends on `TMPDIR`.
 */
function isolationVerdict(limits: KernelLimits): string | undefined {
  try {
    isolation().createKernelPolicy({ ...limits, tempDir: '/' });
    return undefined;
  } catch (error) {
    if (InvalidOptionsError.isInstance(error)) return error.issues[0]?.message ?? error.message;
    throw error;
  }
}

type Ctx = z.RefinementCtx;

function refuse(ctx: Ctx, message: string): never {
  ctx.addIssue({ code: 'custom', message });
  return z.NEVER;
}

/** `--memory SIZE`: bytes, as `parseSize` reads them (`512M`, `2G`), at least the isolation package's minimum. */
const memoryField = z.string().transform((text, ctx) => {
  const bytes = parseSize(text);
  if (bytes === undefined) {
    return refuse(ctx, `--memory "${text}" is not a size: use a number with a unit, e.g. --memory 512M or --memory 2G`);
  }
  const problem = isolationVerdict({ memoryBytes: bytes });
  if (problem) return refuse(ctx, `--memory "${text}": ${problem}, e.g. --memory 512M`);
  return bytes;
});

/** `--max-processes N`: a whole number, at least the isolation package's minimum. */
const processesField = z.string().transform((text, ctx) => {
  const n = /^\s*\d+\s*$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n)) {
    return refuse(ctx, `--max-processes "${text}" is not a whole number, e.g. --max-processes 64`);
  }
  const problem = isolationVerdict({ maxProcesses: n });
  if (problem) return refuse(ctx, `--max-processes "${text}": ${problem}, e.g. --max-processes 64`);
  return n;
});

/**
 * `--cpu-time DURATION`: whole seconds (`RLIMIT_CPU` counts seconds; a value the kernel would round is refused rather
 * than changed), at least one.
 */
const cpuTimeField = z.string().transform((text, ctx) => {
  const ms = parseDuration(text);
  if (ms === undefined) {
    return refuse(ctx, `--cpu-time "${text}" is not a duration: use a number with a unit, e.g. --cpu-time 10m or 90s`);
  }
  if (ms < 1000 || ms % 1000 !== 0) {
    return refuse(
      ctx,
      `--cpu-time "${text}" is not a whole number of seconds from 1s: CPU time is limited in seconds, e.g. --cpu-time 10m or 90s`,
    );
  }
  const seconds = ms / 1000;
  const problem = isolationVerdict({ cpuSeconds: seconds });
  if (problem) return refuse(ctx, `--cpu-time "${text}": ${problem}, e.g. --cpu-time 10m`);
  return seconds;
});

/** The zod fields of the limit flags, for the stack schema. */
export const limitFields = {
  memory: memoryField.optional(),
  'max-processes': processesField.optional(),
  'cpu-time': cpuTimeField.optional(),
  'no-network': z.boolean().optional(),
};

const TRUE_WORDS = new Set(['1', 'true', 'yes', 'on']);
const FALSE_WORDS = new Set(['0', 'false', 'no', 'off']);

/**
 * Reads `KERNELWARDEN_NO_NETWORK`: `1`/`true`/`yes`/`on` cut the network, `0`/`false`/`no`/`off` leave it; anything
 * else is a mistake, returned as its message.
 */
export function parseSwitch(variable: string, text: string): boolean | { problem: string } {
  const word = text.trim().toLowerCase();
  if (TRUE_WORDS.has(word)) return true;
  if (FALSE_WORDS.has(word)) return false;
  return { problem: `${variable} "${text}" is not on or off: use 1 to cut the kernels off the network, or 0` };
}

/** The parsed limit flags as `StackOptions` fields (each undefined when not asked for). */
export function limitOptions(values: {
  memory?: number | undefined;
  'max-processes'?: number | undefined;
  'cpu-time'?: number | undefined;
  'no-network'?: boolean | undefined;
}): Pick<StackOptions, 'memoryBytes' | 'maxProcesses' | 'cpuSeconds' | 'network'> {
  return {
    memoryBytes: values.memory,
    maxProcesses: values['max-processes'],
    cpuSeconds: values['cpu-time'],
    network: values['no-network'] === true ? false : undefined,
  };
}
