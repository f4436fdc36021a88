import { KernelwardenError } from '@kernelwarden/core';
import type { NotebookRun } from './types.js';

/**
 * The base of this package's errors. Recognise them with `NotebookError.isInstance(e)` (works across duplicate
 * installs). Errors raised while cells ran carry `result`: the notebook as far as it got, ready to be written.
 */
export class NotebookError extends KernelwardenError {
  static override readonly brand: string = 'NotebookError';
  /** The notebook and the cells as far as the run got, when the error happened during a run. */
  readonly result: NotebookRun | undefined;

  constructor(message: string, options: { code: string; cause?: unknown; retryable?: boolean; result?: NotebookRun }) {
    super(message, options);
    this.result = options.result;
  }
}

/**
 * A notebook is not nbformat v4 JSON: `path` names the bad field (`cells.3.source`, empty for the document itself).
 * Code `NOTEBOOK_INVALID`.
 */
export class NotebookFormatError extends NotebookError {
  static override readonly brand: string = 'NotebookFormatError';
  /** Dotted path of the first bad field. */
  readonly path: string;
  /** Every problem found, each with its path. */
  readonly issues: readonly { path: string; message: string }[];
  /** The file the notebook was read from, when it was read from one. */
  readonly file: string | undefined;

  constructor(issues: readonly { path: string; message: string }[], options: { file?: string; cause?: unknown } = {}) {
    const first = issues[0] ?? { path: '', message: 'invalid' };
    const where = first.path ? ` at "${first.path}"` : '';
    const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : '';
    const file = options.file ? ` (${options.file})` : '';
    super(`Invalid notebook${file}${where}: ${first.message}${more}`, {
      code: 'NOTEBOOK_INVALID',
      cause: options.cause,
    });
    this.path = first.path;
    this.issues = issues;
    this.file = options.file;
  }
}

/** A notebook file could not be read or written (missing, unreadable, not UTF-8). Code `NOTEBOOK_IO`. */
export class NotebookIOError extends NotebookError {
  static override readonly brand: string = 'NotebookIOError';
  /** The file concerned. */
  readonly file: string;

  constructor(message: string, options: { file: string; cause?: unknown }) {
    super(message, { code: 'NOTEBOOK_IO', cause: options.cause });
    this.file = options.file;
  }
}

/** Parameters that cannot be injected (no translator for the language, a bad name or value). Code `NOTEBOOK_PARAMETERS`. */
export class NotebookParameterError extends NotebookError {
  static override readonly brand: string = 'NotebookParameterError';
  /** The parameter concerned, when one is. */
  readonly parameter: string | undefined;

  constructor(message: string, options: { parameter?: string } = {}) {
    super(message, { code: 'NOTEBOOK_PARAMETERS' });
    this.parameter = options.parameter;
  }
}

/** What the failing cell is in the notebook. */
interface CellPlace {
  /** The cell's index in the notebook's `cells` (after parameters were injected). */
  cellIndex: number;
  /** The cell's `id`, when the notebook has ids. */
  cellId: string | undefined;
}

/**
 * A cell raised and errors were not allowed for it (`allowErrors`, `allowErrorNames`, the `raises-exception` tag).
 * Code `NOTEBOOK_CELL_ERROR`. The run stopped after this cell; `result` holds the notebook with its error output.
 */
export class NotebookCellError extends NotebookError {
  static override readonly brand: string = 'NotebookCellError';
  readonly cellIndex: number;
  readonly cellId: string | undefined;
  readonly ename: string;
  readonly evalue: string;
  readonly traceback: readonly string[];

  constructor(
    place: CellPlace,
    error: { ename: string; evalue: string; traceback: readonly string[] },
    result: NotebookRun,
  ) {
    super(
      `cell ${place.cellIndex}${place.cellId ? ` (id ${place.cellId})` : ''} raised ${error.ename}: ${error.evalue}`,
      {
        code: 'NOTEBOOK_CELL_ERROR',
        result,
      },
    );
    this.cellIndex = place.cellIndex;
    this.cellId = place.cellId;
    this.ename = error.ename;
    this.evalue = error.evalue;
    this.traceback = error.traceback;
  }
}

/**
 * A cell overran its budget (`cellTimeoutMs`, or the session's watchdog): it was interrupted, or killed and its kernel
 * restarted. The run stops there whatever `allowErrors` says. `name` is `'TimeoutError'`, code `NOTEBOOK_CELL_TIMEOUT`,
 * retryable; `cause` is the watchdog's error when the kernel had to be reset.
 */
export class NotebookCellTimeoutError extends NotebookError {
  static override readonly brand: string = 'NotebookCellTimeoutError';
  readonly cellIndex: number;
  readonly cellId: string | undefined;
  /** The budget that ran out, when known. */
  readonly timeoutMs: number | undefined;
  /** True when the kernel was killed and restarted (its state is gone); false when the interrupt stopped the cell. */
  readonly kernelReset: boolean;

  constructor(
    place: CellPlace,
    options: { timeoutMs: number | undefined; kernelReset: boolean; result: NotebookRun; cause?: unknown },
  ) {
    const budget = options.timeoutMs === undefined ? '' : ` of ${options.timeoutMs / 1000}s`;
    const what = options.kernelReset ? 'the kernel was killed and restarted' : 'it was interrupted';
    super(
      `cell ${place.cellIndex}${place.cellId ? ` (id ${place.cellId})` : ''} exceeded its budget${budget}: ${what}`,
      {
        code: 'NOTEBOOK_CELL_TIMEOUT',
        retryable: true,
        result: options.result,
        cause: options.cause,
      },
    );
    Object.defineProperty(this, 'name', {
      value: 'TimeoutError',
      enumerable: false,
      writable: true,
      configurable: true,
    });
    this.cellIndex = place.cellIndex;
    this.cellId = place.cellId;
    this.timeoutMs = options.timeoutMs;
    this.kernelReset = options.kernelReset;
  }
}

/**
 * The kernel could not run a cell: it died, could not start, or the session was stopped under the run. Code
 * `NOTEBOOK_KERNEL`; `cause` is the kernel's or the session's own error.
 */
export class NotebookKernelError extends NotebookError {
  static override readonly brand: string = 'NotebookKernelError';
  readonly cellIndex: number;
  readonly cellId: string | undefined;

  constructor(place: CellPlace, message: string, options: { result: NotebookRun; cause?: unknown }) {
    super(`cell ${place.cellIndex}${place.cellId ? ` (id ${place.cellId})` : ''}: ${message}`, {
      code: 'NOTEBOOK_KERNEL',
      result: options.result,
      cause: options.cause,
    });
    this.cellIndex = place.cellIndex;
    this.cellId = place.cellId;
  }
}
