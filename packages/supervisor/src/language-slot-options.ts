import { parseOptions, type ReadIsolationPolicy } from '@kernelwarden/core';
import { z } from 'zod/v3';
import { slotLabel, unavailableName } from './language-slot.js';
import type { Lease, SupervisedKernel } from './lease.js';

/** What `spawn` is told when a language slot needs a kernel. */
export interface SlotSpawnContext<H = unknown> {
  /** The slot's environment name (`slotEnvs[language]`); `undefined` means the default. */
  env: string | undefined;
  /** The session's working directory. */
  cwd?: string;
  /** The session's read-isolation policy: the spawned kernel must run under it. */
  readIsolation?: ReadIsolationPolicy;
  /** Aborts when the kernel is no longer wanted (stop, close, superseded). */
  signal: AbortSignal;
  /** The session's host-side state. */
  host?: H;
}

/** Options of `createLanguageSlot()`; `N` is the language's name (`'julia'`). */
export interface LanguageSlotOptions<
  K extends SupervisedKernel = SupervisedKernel,
  H = unknown,
  N extends string = string,
> {
  /** The language: its name in the session (`execute(code, { language })`) and its supervisor slot. */
  language: N;
  /** The language's name for people, in messages. @defaultValue `language` with its first letter capitalised */
  label?: string;
  /** The `ename` of a soft failure's error result. @defaultValue `` `${label}KernelUnavailable` `` */
  unavailableName?: string;
  /** Starts one kernel; a throw becomes `<label> kernel unavailable: <its message>`. */
  spawn: (ctx: SlotSpawnContext<H>) => K | Promise<K>;
  /** Runs after every new generation (new kernel, and the watchdog's restarts); a failure discards that kernel. */
  bootstrap?: (lease: Lease<K>) => Promise<void>;
}

/** `LanguageSlotOptions` validated, with every default applied. */
export interface ResolvedLanguageSlotOptions<
  K extends SupervisedKernel = SupervisedKernel,
  H = unknown,
  N extends string = string,
> {
  readonly language: N;
  readonly label: string;
  readonly unavailableName: string;
  readonly spawn: (ctx: SlotSpawnContext<H>) => K | Promise<K>;
  readonly bootstrap: ((lease: Lease<K>) => Promise<void>) | undefined;
}

/** A function option (zod's own function schema is not a value schema in v4). */
export const functionSchema = z.custom<(...args: never[]) => unknown>(
  (value) => typeof value === 'function',
  'expected a function',
);

const name = z.string().min(1, 'expected a non-empty string');

const languageSlotOptionsSchema = z.object({
  language: name,
  label: name.optional(),
  unavailableName: name.optional(),
  spawn: functionSchema,
  bootstrap: functionSchema.optional(),
});

/**
 * Validates `createLanguageSlot()` options and applies their defaults; throws `InvalidOptionsError` naming the bad
 * field (`options.spawn`).
 *
 * `createLanguageSlot()` calls it; call it yourself to check configuration before use.
 */
export function resolveLanguageSlotOptions<K extends SupervisedKernel, H, N extends string>(
  options: LanguageSlotOptions<K, H, N>,
): ResolvedLanguageSlotOptions<K, H, N> {
  parseOptions(languageSlotOptionsSchema, options, { subject: 'language slot options', root: 'options' });
  const slot = { language: options.language, label: options.label, unavailableName: options.unavailableName };
  return Object.freeze({
    language: options.language,
    label: slotLabel(slot),
    unavailableName: unavailableName(slot),
    spawn: options.spawn,
    bootstrap: options.bootstrap,
  });
}
