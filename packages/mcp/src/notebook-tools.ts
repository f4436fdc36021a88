import { isAbsolute, parse, resolve } from 'node:path';
import { type ExecuteResult, stripAnsi } from '@kernelwarden/core';
import type { CellReport, MessageTap, NotebookRun, Parameters } from '@kernelwarden/notebook';
import type { KernelSession, SupervisedKernel } from '@kernelwarden/supervisor';
import type { KernelLanguage } from './cell-run.js';
import type { KernelToolResult } from './cell-transcript.js';
import { notebookModule } from './notebook-module.js';
import { ProgressReporter } from './progress.js';
import { HeadTailText } from './text-cap.js';
import type { KernelToolCall } from './tool-call.js';
import type { ResolvedKernelToolOptions } from './tool-options.js';

/** Cells `save_notebook` can save per language, at most: the oldest go first. */
export const MAX_RECORDED_CELLS = 1_000;
/** Output bytes (as JSON) the record keeps per language, at most: the oldest cells go first. */
export const MAX_RECORDED_BYTES = 32 * 1024 * 1024;
/** Characters of output each cell shows in a `run_notebook` answer (its last ones). */
const CELL_TAIL_CHARS = 300;

/** The input of `run_notebook`. */
export interface RunNotebookInput {
  path: string;
  parameters?: Record<string, unknown> | undefined;
  output_path?: string | undefined;
  allow_errors?: boolean | undefined;
  timeout_seconds?: number | undefined;
}

/** The input of `save_notebook`. */
export interface SaveNotebookInput {
  output_path: string;
  language?: KernelLanguage | undefined;
}

interface RecordedCell {
  code: string;
  result: ExecuteResult;
  bytes: number;
}

/** The cells `run_code` ran, per language, bounded in count and bytes: what `save_notebook` writes. */
export class CellRecord {
  readonly #cells = new Map<KernelLanguage, RecordedCell[]>();
  readonly #bytes = new Map<KernelLanguage, number>();
  readonly #dropped = new Map<KernelLanguage, number>();

  add(language: KernelLanguage, code: string, result: ExecuteResult): void {
    const cells = this.#cells.get(language) ?? [];
    this.#cells.set(language, cells);
    const bytes = code.length + JSON.stringify(result.outputs).length;
    cells.push({ code, result, bytes });
    let total = (this.#bytes.get(language) ?? 0) + bytes;
    let dropped = this.#dropped.get(language) ?? 0;
    while (cells.length > 0 && (cells.length > MAX_RECORDED_CELLS || total > MAX_RECORDED_BYTES)) {
      total -= (cells.shift() as RecordedCell).bytes;
      dropped += 1;
    }
    this.#bytes.set(language, total);
    this.#dropped.set(language, dropped);
  }

  cells(language: KernelLanguage): readonly RecordedCell[] {
    return this.#cells.get(language) ?? [];
  }

  dropped(language: KernelLanguage): number {
    return this.#dropped.get(language) ?? 0;
  }
}

/**
 * `run_notebook` and `save_notebook`: notebooks run on the session's kernel, and the session's cells saved as one.
 * Paths resolve against `cwd`; only `.ipynb` paths are accepted.
 */
export class NotebookTools<K extends SupervisedKernel = SupervisedKernel, H = unknown, L extends string = never> {
  readonly #session: KernelSession<K, H, L>;
  readonly #options: ResolvedKernelToolOptions;
  readonly #record: CellRecord;
  readonly #cwd: string;
  readonly #tap: MessageTap | undefined;

  constructor(
    session: KernelSession<K, H, L>,
    options: ResolvedKernelToolOptions,
    record: CellRecord,
    extra: { cwd: string; tap?: MessageTap | undefined },
  ) {
    this.#session = session;
    this.#options = options;
    this.#record = record;
    this.#cwd = extra.cwd;
    this.#tap = extra.tap;
  }

  /** Runs a notebook's cells in order on the session's kernel and writes the executed notebook. Never rejects. */
  async runNotebook(input: RunNotebookInput, call: KernelToolCall = {}): Promise<KernelToolResult> {
    const path = this.#notebookPath(input.path, 'path');
    if (typeof path !== 'string') return path;
    const outputPath = this.#notebookPath(input.output_path ?? defaultOutput(path), 'output_path');
    if (typeof outputPath !== 'string') return outputPath;
    const nbm = notebookModule();
    let notebook: ReturnType<typeof nbm.loadNotebook>;
    try {
      notebook = await nbm.readNotebook(path, call.signal ? { signal: call.signal } : {});
    } catch (error) {
      return text(`The notebook could not be read: ${messageOf(error)}`, true);
    }
    const progress = call.onProgress
      ? new ProgressReporter(call.onProgress, {
          clock: this.#options.clock,
          intervalMs: this.#options.progressIntervalMs,
          heartbeatMs: this.#options.heartbeatMs,
        })
      : undefined;
    const timeoutMs =
      input.timeout_seconds !== undefined
        ? input.timeout_seconds * 1000
        : this.#options.defaultTimeoutMs > 0
          ? this.#options.defaultTimeoutMs
          : undefined;
    progress?.start();
    let run: NotebookRun | undefined;
    let failure: unknown;
    try {
      run = await nbm.runNotebook(notebook, {
        session: this.#session,
        ...(this.#tap ? { tap: this.#tap } : {}),
        ...(input.parameters && Object.keys(input.parameters).length > 0
          ? { parameters: input.parameters as Parameters, ...parameterLanguageOf(nbm.notebookLanguage(notebook)) }
          : {}),
        allowErrors: input.allow_errors ?? false,
        ...(timeoutMs !== undefined ? { cellTimeoutMs: timeoutMs } : {}),
        outputPath,
        origin: 'agent',
        ...(call.signal ? { signal: call.signal } : {}),
        clock: this.#options.clock,
        onCellStart: ({ index }) => progress?.note(`cell ${index} running`),
        onOutput: ({ output }) => progress?.onOutput(output),
        onCell: (report) => {
          if (report.skipReason === 'stopped') return;
          progress?.note(`cell ${report.index} ${report.status}${report.skipReason ? ` (${report.skipReason})` : ''}`);
        },
      });
    } catch (error) {
      failure = error;
      run = nbm.NotebookError.isInstance(error) ? (error as InstanceType<typeof nbm.NotebookError>).result : undefined;
    } finally {
      progress?.stop();
    }
    if (!run) return text(`The notebook did not run: ${messageOf(failure)}`, true);
    const lines = [
      failure === undefined
        ? `Ran ${input.path}: ${summaryCounts(run.cells)}. Wrote ${outputPath}.`
        : `${input.path} stopped: ${messageOf(failure)}. Wrote the notebook as far as it ran to ${outputPath}.`,
      ...run.cells.filter((c) => c.cellType === 'code').map(cellLine),
    ];
    const body = new HeadTailText(this.#options.maxTextChars);
    body.push(lines.join('\n'));
    return {
      content: [{ type: 'text', text: body.render() }],
      isError: failure !== undefined || run.cells.some((c) => c.status === 'error'),
    };
  }

  /** Writes the cells `run_code` ran in one language (the oldest dropped past the record's bounds). Never rejects. */
  async saveNotebook(input: SaveNotebookInput): Promise<KernelToolResult> {
    const outputPath = this.#notebookPath(input.output_path, 'output_path');
    if (typeof outputPath !== 'string') return outputPath;
    const language = input.language ?? 'python';
    const cells = this.#record.cells(language);
    const nbm = notebookModule();
    const lease = this.#session.supervisor.lease(language);
    const info = (lease?.kernel as { info?: { content?: { language_info?: Record<string, unknown> } } } | undefined)
      ?.info?.content?.language_info;
    try {
      const notebook = nbm.cellsToNotebook(
        cells.map((c) => ({ code: c.code, result: c.result })),
        { language, ...(info ? { languageInfo: info } : {}) },
      );
      await nbm.writeNotebook(outputPath, notebook);
    } catch (error) {
      return text(`The notebook could not be saved: ${messageOf(error)}`, true);
    }
    const dropped = this.#record.dropped(language);
    return text(
      `Saved ${cells.length} ${language === 'r' ? 'R' : 'Python'} cell${cells.length === 1 ? '' : 's'} to ${outputPath}.` +
        (dropped > 0 ? ` The ${dropped} oldest cell${dropped === 1 ? ' was' : 's were'} no longer kept.` : ''),
      false,
    );
  }

  /** `value` resolved against the working directory, or an error answer naming `field`. */
  #notebookPath(value: string, field: string): string | KernelToolResult {
    if (value.trim() === '') return text(`${field} must name a .ipynb file.`, true);
    const path = isAbsolute(value) ? value : resolve(this.#cwd, value);
    if (!path.toLowerCase().endsWith('.ipynb')) {
      return text(`${field} must be a .ipynb file; ${JSON.stringify(value)} is not.`, true);
    }
    return path;
  }
}

/** The parameters' syntax for the kernel a notebook runs in (Python when it names none), when it is Python or R. */
function parameterLanguageOf(language: string): { parameterLanguage?: 'python' | 'R' } {
  if (language === 'python') return { parameterLanguage: 'python' };
  if (language === 'r') return { parameterLanguage: 'R' };
  return {};
}

/** `report.ipynb` → `report.out.ipynb` beside it. */
function defaultOutput(path: string): string {
  const { dir, name } = parse(path);
  return resolve(dir, `${name}.out.ipynb`);
}

function summaryCounts(cells: readonly CellReport[]): string {
  const ran = cells.filter((c) => c.status !== 'skipped').length;
  const errors = cells.filter((c) => c.status === 'error').length;
  return `${ran} code cell${ran === 1 ? '' : 's'} ran${errors > 0 ? `, ${errors} raised (allowed)` : ''}`;
}

/** `[3] ok 0.4s: <the last characters of its output>`, from the outputs the notebook cell was left with. */
function cellLine(report: CellReport): string {
  const head = `[${report.index}] ${report.status === 'skipped' ? `skipped (${report.skipReason})` : report.status}`;
  const took = report.durationMs !== undefined ? ` ${(report.durationMs / 1000).toFixed(1)}s` : '';
  const outputs = report.cell.cell_type === 'code' ? report.cell.outputs : [];
  let out = '';
  for (const output of outputs) {
    if (output.output_type === 'stream') out += output.text;
    else if (output.output_type === 'error') out += `${output.ename}: ${output.evalue}\n`;
    else if (Object.keys(output.data).some((t) => t.startsWith('image/'))) out += '[image]\n';
    else if (typeof output.data['text/plain'] === 'string') out += `${output.data['text/plain']}\n`;
  }
  out = stripAnsi(out)
    .trim()
    .replace(/\s*\n\s*/g, ' ⏎ ');
  if (out.length > CELL_TAIL_CHARS) out = `…${out.slice(-CELL_TAIL_CHARS)}`;
  return out ? `${head}${took}: ${out}` : `${head}${took}`;
}

function text(message: string, isError: boolean): KernelToolResult {
  return { content: [{ type: 'text', text: message }], isError };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
