import type { ExecuteResult, Output } from '@kernelwarden/core';
import { NBFORMAT_MINOR, newCellId } from './format.js';
import { outputFromCore } from './outputs.js';
import type { CodeCell, JsonObject, Notebook } from './types.js';

/** One cell of a session to save: its code and, when it ran, its result (or its outputs). */
export interface SessionCell {
  code: string;
  /** The cell's result; its `outputs` and `executionCount` go into the notebook cell. */
  result?: Pick<ExecuteResult, 'outputs' | 'executionCount'>;
  /** Outputs to use instead of `result.outputs` (e.g. those an `onOutput` callback collected). */
  outputs?: readonly Output[];
  /** Cell metadata (tags, …). @defaultValue {} */
  metadata?: JsonObject;
}

/** Options of `cellsToNotebook()`. */
export interface CellsToNotebookOptions {
  /** The cells' language: `'python'` or `'r'` pick a kernelspec and `language_info`. @defaultValue 'python' */
  language?: string;
  /** `metadata.kernelspec`. @defaultValue ipykernel's (`python3`) or IRkernel's (`ir`) */
  kernelspec?: { name: string; display_name: string; language?: string; [field: string]: unknown };
  /** `metadata.language_info`, e.g. a kernel's `info.content.language_info`. @defaultValue `{ name }` of the language */
  languageInfo?: JsonObject;
  /** Number the cells 1, 2, … instead of keeping the kernel's execution counts. @defaultValue false */
  renumber?: boolean;
}

const KERNELSPECS: Record<string, { name: string; display_name: string; language: string }> = {
  python: { name: 'python3', display_name: 'Python 3 (ipykernel)', language: 'python' },
  r: { name: 'ir', display_name: 'R', language: 'R' },
};

/**
 * A notebook (nbformat 4.5) of cells that ran elsewhere, e.g. an agent's session: one code cell per entry, with its
 * outputs and execution count, fresh cell ids, and the kernelspec and `language_info` of `options.language`. Write it
 * with `writeNotebook()`.
 */
export function cellsToNotebook(cells: readonly SessionCell[], options: CellsToNotebookOptions = {}): Notebook {
  const language = (options.language ?? 'python').toLowerCase();
  const kernelspec = options.kernelspec ?? KERNELSPECS[language];
  const languageInfo = options.languageInfo ?? { name: kernelspec?.language ?? language };
  const codeCells: CodeCell[] = cells.map((c, i) => ({
    id: newCellId(),
    cell_type: 'code',
    metadata: { ...(c.metadata ?? {}) },
    source: c.code,
    outputs: (c.outputs ?? c.result?.outputs ?? []).map(outputFromCore),
    execution_count: options.renumber ? i + 1 : (c.result?.executionCount ?? null),
  }));
  return {
    nbformat: 4,
    nbformat_minor: NBFORMAT_MINOR,
    metadata: { ...(kernelspec ? { kernelspec: { ...kernelspec } } : {}), language_info: { ...languageInfo } },
    cells: codeCells,
  };
}
