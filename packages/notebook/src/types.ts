import type { ExecuteResult } from '@kernelwarden/core';

/** A JSON object as a notebook holds it; unknown fields are kept as they are. */
export type JsonObject = Record<string, unknown>;

/** One output of a code cell, as nbformat v4 stores it (multi-line strings joined). */
export type NotebookOutput =
  | { output_type: 'stream'; name: string; text: string }
  | { output_type: 'display_data'; data: JsonObject; metadata: JsonObject }
  | { output_type: 'execute_result'; data: JsonObject; metadata: JsonObject; execution_count: number | null }
  | { output_type: 'error'; ename: string; evalue: string; traceback: string[] };

/** A code cell (`source` joined into one string, as nbformat holds it in memory). */
export interface CodeCell {
  cell_type: 'code';
  id?: string;
  metadata: JsonObject;
  source: string;
  outputs: NotebookOutput[];
  execution_count: number | null;
  [field: string]: unknown;
}

/** A markdown or raw cell. */
export interface TextCell {
  cell_type: 'markdown' | 'raw';
  id?: string;
  metadata: JsonObject;
  source: string;
  attachments?: JsonObject;
  [field: string]: unknown;
}

export type NotebookCell = CodeCell | TextCell;

/** An nbformat v4 notebook in memory: multi-line strings joined, as `nbformat.read()` returns it. */
export interface Notebook {
  nbformat: 4;
  nbformat_minor: number;
  metadata: JsonObject;
  cells: NotebookCell[];
  [field: string]: unknown;
}

/** What happened to one cell of a run. */
export type CellStatus = 'ok' | 'error' | 'skipped' | 'timeout';

/** One cell of a run, as `onCell` and `NotebookRun.cells` report it. */
export interface CellReport {
  /** The cell's index in the run's notebook (after parameters were injected). */
  index: number;
  /** The cell's `id`, when the notebook has ids. */
  id: string | undefined;
  cellType: NotebookCell['cell_type'];
  /**
   * `ok`: the cell ran without error; `error`: it raised (allowed or not); `timeout`: it overran its budget;
   * `skipped`: not run (not code, blank, tagged `skip-execution`, or after the cell that stopped the run).
   */
  status: CellStatus;
  /** Why a cell was skipped: `not-code`, `blank`, `skip-execution` or `stopped`. */
  skipReason?: 'not-code' | 'blank' | 'skip-execution' | 'stopped';
  /** The execution count written into the cell (1, 2, … over the cells run). */
  executionCount: number | null;
  /** The cell as it is in the notebook now (outputs included). */
  cell: NotebookCell;
  /** The kernel's result, for a cell that ran and answered. */
  result?: ExecuteResult;
  /** Milliseconds the cell took, for a cell that ran. */
  durationMs?: number;
}

/** What `runNotebook()` resolves with. */
export interface NotebookRun {
  /** The executed notebook (write it with `writeNotebook` or `serializeNotebook`). */
  notebook: Notebook;
  /** One report per cell of `notebook`, in order. */
  cells: CellReport[];
}
