import type { Clock, ExecuteResult, KernelHandle, Output } from '@kernelwarden/core';
import { InvalidOptionsError, isClock, parseOptions } from '@kernelwarden/core';
import { z } from 'zod/v3';
import type { Parameters } from './parameters.js';
import type { MessageTap } from './tap.js';
import type { CellReport, CodeCell } from './types.js';

/** What a run needs of a `KernelSession` (`@kernelwarden/supervisor`): `execute`, and its supervisor for `language_info`. */
export interface NotebookSession<L extends string = string> {
  execute(
    code: string,
    opts: { language?: L; cellId?: string; origin?: string; onOutput?: (o: Output) => void; signal?: AbortSignal },
  ): Promise<ExecuteResult>;
  readonly supervisor?: { lease(slot: string): { kernel: unknown } | undefined };
}

/** A cell about to run. */
export interface CellStartEvent {
  index: number;
  id: string | undefined;
  cell: CodeCell;
  /** The execution count the cell will get. */
  executionCount: number;
}

/** Options of `runNotebook()`. */
export interface RunNotebookOptions {
  /**
   * The session to run the cells in (the CLI's and MCP server's: its executor — the watchdog — bounds each cell).
   * Exactly one of `session` and `kernel` is required.
   */
  session?: NotebookSession<any>;
  /**
   * A kernel to run the cells on, under a watchdog made for the run (`cellTimeoutMs`, `interruptGraceMs`,
   * `killGraceMs`): a cell that overruns is interrupted, then the kernel killed and restarted. The kernel stays the
   * caller's: it is not shut down (unless the watchdog had to abandon it).
   */
  kernel?: KernelHandle;
  /**
   * The session slot the cells run in (`'python'`, `'r'`). @defaultValue from the notebook: `kernelspec.language`,
   * `language_info.name` or `kernelspec.name` (`ir` → `'r'`), else `'python'`
   */
  language?: string;
  /**
   * The message tap whose `wrap()` made the kernels' WebSockets. With it outputs are built from the kernel's
   * messages exactly as nbclient builds them (`clear_output`, `update_display_data`, display ids, the kernel's
   * timestamps); without it from `ExecuteResult` outputs (see the README's "Without a tap").
   */
  tap?: MessageTap;
  /** Parameters injected as papermill injects them (a cell tagged `injected-parameters`). */
  parameters?: Parameters;
  /** The language the parameters are written in. @defaultValue from the notebook, as papermill picks it */
  parameterLanguage?: 'python' | 'R';
  /** Go on after a cell raises (its error output is kept). @defaultValue false */
  allowErrors?: boolean;
  /** Error names (`ename`) that do not stop the run. @defaultValue [] */
  allowErrorNames?: string[];
  /**
   * Each cell's budget in milliseconds; `0` or `Infinity` disables it. With `kernel`: the run's watchdog budget
   * (default: the watchdog's, `KERNELWARDEN_CELL_TIMEOUT` or 900 s). With `session`: on top of the session's own
   * executor, by aborting the cell when it runs out (the session's watchdog then interrupts, kills, restarts).
   */
  cellTimeoutMs?: number;
  /** With `kernel`: the watchdog's wait after the interrupt. @defaultValue the watchdog's (10 s) */
  interruptGraceMs?: number;
  /** With `kernel`: the watchdog's wait after the kill. @defaultValue the watchdog's (10 s) */
  killGraceMs?: number;
  /** Merge each cell's stream outputs as nbclient's `coalesce_streams` does. @defaultValue false */
  mergeStreams?: boolean;
  /** Record `metadata.execution` timestamps under nbclient's keys. @defaultValue true */
  recordTiming?: boolean;
  /**
   * Write the notebook here when the run ends, also when a cell stopped it (as papermill does) — not when the input
   * could not be read. May be the input's own path.
   */
  outputPath?: string;
  /** Stops the run: the running cell is interrupted (through the watchdog), and the run rejects with the reason. */
  signal?: AbortSignal;
  /** The label kept on the session's and watchdog's events. @defaultValue 'notebook' */
  origin?: string;
  /** Measures `cellTimeoutMs` and `durationMs`. @defaultValue systemClock */
  clock?: Clock;
  /** Called before each code cell runs. */
  onCellStart?: (event: CellStartEvent) => void;
  /** Called with every output of the running cell as it arrives. */
  onOutput?: (event: { index: number; output: Output }) => void;
  /** Called after every cell, run or skipped, with its report. */
  onCell?: (report: CellReport) => void;
}

const callback = z.custom<(...args: never[]) => unknown>((v) => typeof v === 'function', 'must be a function');
const timeout = z
  .number()
  .refine((n) => !Number.isNaN(n), 'must be a number')
  .refine((n) => n >= 0, 'must be >= 0');
const optionsSchema = z
  .object({
    session: z
      .custom<NotebookSession>(
        (v) => v !== null && typeof v === 'object' && typeof (v as NotebookSession).execute === 'function',
        'must be a session with execute()',
      )
      .optional(),
    kernel: z
      .custom<KernelHandle>(
        (v) => v !== null && typeof v === 'object' && typeof (v as KernelHandle).execute === 'function',
        'must be a kernel with execute()',
      )
      .optional(),
    language: z.string().min(1).optional(),
    tap: z
      .custom<MessageTap>(
        (v) => v !== null && typeof v === 'object' && typeof (v as MessageTap).watch === 'function',
        'must be a MessageTap (createMessageTap())',
      )
      .optional(),
    parameters: z.union([z.record(z.string(), z.unknown()), z.array(z.tuple([z.string(), z.unknown()]))]).optional(),
    parameterLanguage: z.enum(['python', 'R']).optional(),
    allowErrors: z.boolean().optional(),
    allowErrorNames: z.array(z.string()).optional(),
    cellTimeoutMs: timeout.optional(),
    interruptGraceMs: timeout.optional(),
    killGraceMs: timeout.optional(),
    mergeStreams: z.boolean().optional(),
    recordTiming: z.boolean().optional(),
    outputPath: z.string().min(1).optional(),
    signal: z.custom<AbortSignal>((v) => v instanceof AbortSignal, 'must be an AbortSignal').optional(),
    origin: z.string().optional(),
    clock: z.custom<Clock>((v) => isClock(v), 'must be a Clock').optional(),
    onCellStart: callback.optional(),
    onOutput: callback.optional(),
    onCell: callback.optional(),
  })
  .strict();

/**
 * `options` checked against `RunNotebookOptions`, exactly one of `session` and `kernel` given; bad options throw
 * `InvalidOptionsError` naming the field.
 */
export function parseRunOptions(options: RunNotebookOptions): RunNotebookOptions {
  const opts = parseOptions(optionsSchema, options, {
    subject: 'runNotebook options',
    root: 'options',
  }) as unknown as RunNotebookOptions;
  if ((opts.session === undefined) === (opts.kernel === undefined)) {
    throw new InvalidOptionsError([{ path: 'options.session', message: 'give exactly one of session and kernel' }], {
      subject: 'runNotebook options',
    });
  }
  return opts;
}
