import { type Clock, isClock, parseOptions, systemClock } from '@kernelwarden/core';
import { z } from 'zod/v3';
import { DEFAULT_MAX_SOURCE_BYTES } from './source-check.js';

/** Most characters of text one tool result carries (head and tail kept, the middle cut). */
export const DEFAULT_MAX_TEXT_CHARS = 32_000;
/** Most images one tool result carries. */
export const DEFAULT_MAX_IMAGES = 4;
/** Largest image (decoded bytes) a tool result carries; bigger ones are named and left out. */
export const DEFAULT_MAX_IMAGE_BYTES = 1_048_576;
/** Shortest gap between two progress notifications carrying output. */
export const DEFAULT_PROGRESS_INTERVAL_MS = 250;
/** A silent cell still sends a progress notification this often, so that clients' request timeouts do not fire. */
export const DEFAULT_HEARTBEAT_MS = 10_000;
/**
 * How long a `run_code` call waits for its cell before answering with the output so far and an id to follow it
 * with: 45 s, under the 60 s request timeout of MCP clients built on the official SDKs.
 */
export const DEFAULT_MAX_WAIT_MS = 45_000;
/** The timeout of a `run_code` call that gives no `timeout_seconds`: `0`, none (the session's own budget applies). */
export const DEFAULT_RUN_CODE_TIMEOUT_MS = 0;

/**
 * How the kernel tools shape their results for a model and how they bound a cell.
 *
 * Pass it to `createMcpServer()` or `createAgentTools()`; every field is optional.
 */
export interface KernelToolOptions {
  /** Most characters of text in one result; the head and the tail are kept. @defaultValue {@link DEFAULT_MAX_TEXT_CHARS} */
  maxTextChars?: number;
  /** Most images in one result; the rest are named in the text. @defaultValue {@link DEFAULT_MAX_IMAGES} */
  maxImages?: number;
  /**
   * Largest image in decoded bytes; bigger ones are named in the text instead.
   * @defaultValue {@link DEFAULT_MAX_IMAGE_BYTES}
   */
  maxImageBytes?: number;
  /**
   * The timeout of a `run_code` call that gives no `timeout_seconds`, in milliseconds; `0` or absent leaves cells
   * unbounded here (the session's own watchdog budget, if any, still applies). On timeout the kernel is interrupted,
   * and killed and restarted by the session's watchdog when it ignores the interrupt.
   * @defaultValue {@link DEFAULT_RUN_CODE_TIMEOUT_MS} (none)
   */
  defaultTimeoutMs?: number;
  /**
   * How long a `run_code` call waits for its cell (ms) when it gives no `max_wait_seconds`; a cell still running
   * then is answered with its output so far and an id that `check_background` follows and `cancel_cell` stops —
   * the cell goes on in the same kernel. `0`: wait for the end. An MCP task (a client that asks for one) always
   * runs to the end. @defaultValue {@link DEFAULT_MAX_WAIT_MS}
   */
  maxWaitMs?: number;
  /**
   * The largest `code` (UTF-8 bytes) `run_code` and `start_background` send to a kernel; a bigger one is answered
   * with an `isError` result naming the limit, and nothing runs. @defaultValue {@link DEFAULT_MAX_SOURCE_BYTES}
   */
  maxSourceBytes?: number;
  /** Shortest gap between progress notifications that carry output. @defaultValue {@link DEFAULT_PROGRESS_INTERVAL_MS} */
  progressIntervalMs?: number;
  /** Gap after which a silent cell still reports progress. @defaultValue {@link DEFAULT_HEARTBEAT_MS} */
  heartbeatMs?: number;
  /** The clock of timeouts and progress timers; inject testkit's `ManualClock` in tests. @defaultValue `systemClock` */
  clock?: Clock;
}

/** `KernelToolOptions` with every default applied. */
export interface ResolvedKernelToolOptions {
  readonly maxTextChars: number;
  readonly maxImages: number;
  readonly maxImageBytes: number;
  readonly defaultTimeoutMs: number;
  readonly maxSourceBytes: number;
  readonly maxWaitMs: number;
  readonly progressIntervalMs: number;
  readonly heartbeatMs: number;
  readonly clock: Clock;
}

const count = z.number().int().nonnegative();
const ms = z.number().nonnegative().finite();

const schema = z.strictObject(
  {
    maxTextChars: z.number().int().min(200).optional(),
    maxImages: count.optional(),
    maxImageBytes: count.optional(),
    defaultTimeoutMs: ms.optional(),
    maxSourceBytes: z.number().int().positive().optional(),
    maxWaitMs: ms.optional(),
    progressIntervalMs: ms.optional(),
    heartbeatMs: z.number().positive().finite().optional(),
    clock: z.custom<Clock>(isClock, 'must be a Clock with now() and setTimer()').optional(),
  },
  { message: 'must be an object' },
);

/**
 * Validates tool options and applies their defaults; throws `InvalidOptionsError` naming the bad field
 * (`options.maxTextChars`).
 *
 * `createMcpServer()` and `createAgentTools()` call it; call it yourself to check configuration early.
 */
export function resolveKernelToolOptions(options: KernelToolOptions = {}): ResolvedKernelToolOptions {
  const o = parseOptions(schema, options, { subject: 'kernel tool options', root: 'options' });
  return {
    maxTextChars: o.maxTextChars ?? DEFAULT_MAX_TEXT_CHARS,
    maxImages: o.maxImages ?? DEFAULT_MAX_IMAGES,
    maxImageBytes: o.maxImageBytes ?? DEFAULT_MAX_IMAGE_BYTES,
    defaultTimeoutMs: o.defaultTimeoutMs ?? DEFAULT_RUN_CODE_TIMEOUT_MS,
    maxSourceBytes: o.maxSourceBytes ?? DEFAULT_MAX_SOURCE_BYTES,
    maxWaitMs: o.maxWaitMs ?? DEFAULT_MAX_WAIT_MS,
    progressIntervalMs: o.progressIntervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS,
    heartbeatMs: o.heartbeatMs ?? DEFAULT_HEARTBEAT_MS,
    clock: o.clock ?? systemClock,
  };
}
