import { type Clock, parseOptions, type ReadIsolationPolicy, systemClock } from '@kernelwarden/core';
import { z } from 'zod/v3';
import { type CellExecutor, plainExecutor } from './executor.js';
import type { LanguageSlot } from './language-slot.js';
import { functionSchema } from './language-slot-options.js';
import type { Lease, SupervisedKernel } from './lease.js';
import { clockSchema, DEFAULT_IDLE_TTL_MS, timeoutSchema } from './supervisor-options.js';

/** The supervisor slot, and the `language`, of a session's Python kernel. */
export const PYTHON_SLOT = 'python';
/** Most background cells a session runs at once, unless `maxBackground` says otherwise. */
export const DEFAULT_MAX_BACKGROUND = 16;
/** Most characters of stdout/stderr a background peek keeps, unless `maxPeekChars` says otherwise. */
export const DEFAULT_MAX_PEEK_CHARS = 1_000_000;
/** Warm Python kernels a session keeps, unless `spares.size` says otherwise: none. */
export const DEFAULT_SPARES_SIZE = 0;

/**
 * What a session's kernel factory is told: which slot and environment the kernel is for, the session's working
 * directory and read-isolation policy (pass both to every kernel you start), why it is built, a signal that aborts
 * when the kernel is no longer wanted, and the session's host-side state.
 */
export interface SlotFactoryContext<H = unknown> {
  slot: string;
  /** The environment name (the session's `env`, or the one `setEnv` asked for); `undefined` means the default. */
  env: string | undefined;
  cwd?: string;
  readIsolation?: ReadIsolationPolicy;
  /** `'main'`: the session's slot kernel; `'background'`: a background cell's own kernel; `'spare'`: a warm spare. */
  purpose: 'main' | 'background' | 'spare';
  signal: AbortSignal;
  /** The session's host-side state (`session.host`): made once per session, the same object for every kernel. */
  host: H;
}

/** Builds one kernel for a session. Start it in `ctx.cwd` under `ctx.readIsolation`, honour `ctx.signal`. */
export type SlotFactory<K extends SupervisedKernel, H = unknown> = (ctx: SlotFactoryContext<H>) => K | Promise<K>;

/**
 * What a session's `bootstrap` is told besides the lease.
 *
 * The lease is the published one (its real generation) for a kernel started where none was running, and after a
 * restart. A kernel that is not published yet gets a provisional lease with `generation: -1` — a warm spare, and the
 * replacement of an environment switch, which is bootstrapped before it is swapped in — so exact-lease operations
 * on it do nothing: use `lease.kernel` itself.
 */
export interface BootstrapContext<H = unknown> {
  /** Aborts when the kernel is no longer wanted: the session stops or closes, or the switch was given up. */
  signal: AbortSignal;
  host: H;
  /** `'main'` for a kernel of the slot (a new generation, or a switch's replacement); `'spare'` for a warm spare. */
  purpose: 'main' | 'spare';
}

/**
 * Options of `new KernelSession()`.
 *
 * `L` names the language slots given in `slots` (`'julia'` for `slots: { julia }`): `execute` accepts
 * `'python' | 'r' | L`.
 */
export interface KernelSessionOptions<K extends SupervisedKernel, H = unknown, L extends string = never> {
  /** Builds the session's Python kernels: main, background and spare. */
  python: SlotFactory<K, H>;
  /**
   * The R slot (`createRSlot()` from `@kernelwarden/r-kernel`): the same as `slots: { r }`. Give the R slot once,
   * here or in `slots`.
   */
  r?: LanguageSlot<SupervisedKernel, H>;
  /**
   * The session's other languages by name (`{ r: createRSlot(…), julia: createLanguageSlot(…) }`); each name must
   * be its slot's `language`, and `execute(code, { language: name })` runs there. `'python'` is `python`'s.
   * @defaultValue none
   */
  slots?: { [N in L]: LanguageSlot<SupervisedKernel, H> };
  /** The initial Python environment name. @defaultValue undefined (the factory's default) */
  env?: string;
  /** The initial environment of each language slot, by name. @defaultValue undefined for each (the slot's default) */
  slotEnvs?: { [N in NoInfer<L> | 'r']?: string };
  /** The working directory handed to every factory and language slot. */
  cwd?: string;
  /** Handed to every kernel the session creates — main, background, spare and every language slot's. */
  readIsolation?: ReadIsolationPolicy;
  /**
   * Runs on every new Python kernel, outside every lock (`interrupt` and `status` answer while it runs): after it is
   * published when no kernel was running (so `interrupt('python')` reaches it), and before it is swapped in for an
   * environment switch (so the old kernel keeps serving until the new one is ready). A bootstrap that throws shuts
   * that kernel down and fails the call that needed it; a failed switch leaves the old kernel in place.
   */
  bootstrap?: (lease: Lease<K>, ctx: BootstrapContext<H>) => void | Promise<void>;
  /** Runs each cell; the watchdog (`createWatchdog()`) plugs in here. @defaultValue `plainExecutor` */
  executor?: CellExecutor;
  /**
   * Makes the session's host-side state, once, on first use. It survives stop, start, setEnv, restarts and worker
   * deaths, and every factory sees it as `ctx.host`. @defaultValue `() => ({})`
   */
  createHost?: () => H;
  /** Keeps `size` started, bootstrapped Python kernels for the current environment. @defaultValue {@link DEFAULT_SPARES_SIZE} */
  spares?: { size: number };
  /**
   * Shut a slot down after this long unused (`state: 'ended', endedReason: 'idle_ttl'`); `0` disables it.
   * @defaultValue {@link DEFAULT_IDLE_TTL_MS} (off)
   */
  idleTtlMs?: number;
  /** Drives the idle timers. @defaultValue `systemClock` */
  clock?: Clock;
  /** Most background cells running at once. @defaultValue {@link DEFAULT_MAX_BACKGROUND} */
  maxBackground?: number;
  /** Most characters of stdout/stderr a background peek keeps. @defaultValue {@link DEFAULT_MAX_PEEK_CHARS} */
  maxPeekChars?: number;
}

/** `KernelSessionOptions` validated, with every default applied and `r` folded into `slots`. */
export interface ResolvedSessionOptions<K extends SupervisedKernel, H> {
  readonly python: SlotFactory<K, H>;
  /** Every language slot by name, `r` included, in the order given. */
  readonly slots: ReadonlyMap<string, LanguageSlot<SupervisedKernel, H>>;
  /** The initial environment of each language slot that has one. */
  readonly slotEnvs: ReadonlyMap<string, string>;
  readonly env: string | undefined;
  readonly cwd: string | undefined;
  readonly readIsolation: ReadIsolationPolicy | undefined;
  readonly bootstrap: KernelSessionOptions<K, H>['bootstrap'];
  readonly executor: CellExecutor;
  readonly createHost: () => H;
  readonly sparesSize: number;
  readonly idleTtlMs: number;
  readonly clock: Clock;
  readonly maxBackground: number;
  readonly maxPeekChars: number;
}

const name = z.string().min(1, 'expected a non-empty string');
const count = (min: number) =>
  z.number().int(`expected an integer >= ${min}`).min(min, `expected an integer >= ${min}`);

const languageSlotSchema = z.object(
  {
    language: z.string({ message: 'expected a string' }),
    ensure: functionSchema,
    lease: functionSchema,
    execute: functionSchema,
    shutdown: functionSchema,
    status: functionSchema,
  },
  { message: 'expected a LanguageSlot' },
);

const sessionOptionsSchema = z
  .object(
    {
      python: z.custom<(...args: never[]) => unknown>(
        (value) => typeof value === 'function',
        'expected a kernel factory function',
      ),
      r: languageSlotSchema.optional(),
      slots: z.record(z.string(), languageSlotSchema).optional(),
      env: name.optional(),
      slotEnvs: z.record(z.string(), name.optional()).optional(),
      cwd: name.optional(),
      readIsolation: z
        .object(
          {
            roots: z.array(z.string(), { message: 'expected an array of paths' }),
            allowedRoots: z.array(z.string(), { message: 'expected an array of paths' }),
          },
          { message: 'expected a ReadIsolationPolicy' },
        )
        .optional(),
      bootstrap: functionSchema.optional(),
      executor: z.object({ run: functionSchema }, { message: 'expected a CellExecutor with run()' }).optional(),
      createHost: functionSchema.optional(),
      spares: z.object({ size: count(0) }, { message: 'expected { size }' }).optional(),
      idleTtlMs: timeoutSchema.optional(),
      clock: clockSchema.optional(),
      maxBackground: count(1).optional(),
      maxPeekChars: count(1).optional(),
    },
    { message: 'expected an object' },
  )
  .superRefine((o, ctx) => {
    const names = new Set(Object.keys(o.slots ?? {}));
    for (const [key, slot] of Object.entries(o.slots ?? {})) {
      if (key === PYTHON_SLOT) {
        ctx.addIssue({ code: 'custom', path: ['slots', key], message: 'the python slot is options.python' });
      } else if (slot.language !== key) {
        ctx.addIssue({ code: 'custom', path: ['slots', key, 'language'], message: `expected "${key}"` });
      }
    }
    if (o.r !== undefined) {
      if (names.has('r')) ctx.addIssue({ code: 'custom', path: ['r'], message: 'give the R slot once: r or slots.r' });
      names.add('r');
    }
    for (const key of Object.keys(o.slotEnvs ?? {})) {
      if (!names.has(key)) {
        ctx.addIssue({ code: 'custom', path: ['slotEnvs', key], message: `this session has no "${key}" slot` });
      }
    }
  });

/**
 * Validates `KernelSession` options and applies their defaults; throws `InvalidOptionsError` naming every bad field's
 * path (`options.spares.size`, `options.slots.julia.language`, …).
 *
 * `new KernelSession()` calls it; call it yourself to check configuration before use.
 */
export function resolveSessionOptions<K extends SupervisedKernel, H = unknown, L extends string = never>(
  options: KernelSessionOptions<K, H, L>,
): ResolvedSessionOptions<K, H> {
  parseOptions(sessionOptionsSchema, options, { subject: 'session options', root: 'options' });
  // The values themselves, not zod's copies: slots, executors and policies keep their identity and prototypes.
  const slots = new Map<string, LanguageSlot<SupervisedKernel, H>>();
  if (options.r) slots.set('r', options.r);
  for (const [key, slot] of Object.entries<LanguageSlot<SupervisedKernel, H>>(options.slots ?? {}))
    slots.set(key, slot);
  const slotEnvs = new Map<string, string>();
  for (const [key, env] of Object.entries<string | undefined>(options.slotEnvs ?? {})) {
    if (env !== undefined) slotEnvs.set(key, env);
  }
  return Object.freeze({
    python: options.python,
    slots,
    slotEnvs,
    env: options.env,
    cwd: options.cwd,
    readIsolation: options.readIsolation,
    bootstrap: options.bootstrap,
    executor: options.executor ?? plainExecutor,
    createHost: options.createHost ?? (() => ({}) as H),
    sparesSize: options.spares?.size ?? DEFAULT_SPARES_SIZE,
    idleTtlMs: options.idleTtlMs ?? DEFAULT_IDLE_TTL_MS,
    clock: options.clock ?? systemClock,
    maxBackground: options.maxBackground ?? DEFAULT_MAX_BACKGROUND,
    maxPeekChars: options.maxPeekChars ?? DEFAULT_MAX_PEEK_CHARS,
  });
}
