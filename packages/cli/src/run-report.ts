import type { ExecuteResult, Output } from '@kernelwarden/core';
import type { SavedFile } from './output-printer.js';
import { formatSize } from './size.js';
import { terminalSafeJson } from './terminal-text.js';

/** The most characters of output data (`outputs`, the traceback) one `--json` report carries. */
export const DEFAULT_REPORT_DATA_CHARS = 64 * 1024 * 1024;

/** What the report says of an output it left out. */
export interface ElidedOutput {
  type: Output['type'];
  /** Set when the output was left out for size: its JSON took at least this many characters. */
  elided: { chars: number; reason: string };
  /** The output's MIME types (display data) or stream name, so the reader knows what it was. */
  mimeTypes?: string[];
  name?: string;
  ename?: string;
}

/** One entry of `RunReport.outputs`: the output as the kernel sent it, or a stub saying it was left out. */
export type ReportOutput = Output | ElidedOutput;

/** The document `kernelwarden run --json` prints: the cell's result plus what the CLI did with it. */
export interface RunReport {
  exitCode: number;
  /** The kernel's verdict, or `'failed'` when the cell never ran, or `'timeout'` when the kernel was reset. */
  status: ExecuteResult['status'] | 'failed' | 'timeout';
  language: string;
  cellId: string;
  executionCount?: number;
  stdout: string;
  stderr: string;
  error?: { ename: string; evalue: string; traceback: string[] } | { code: string | undefined; message: string };
  outputs: ReportOutput[];
  files: SavedFile[];
  /** Images the cell produced that were not saved to `--outputs-dir` (no directory, or past a bound). */
  imagesNotSaved: number;
  timedOut: boolean;
  cancelled: boolean;
  /** True when the watchdog killed and restarted the kernel. */
  kernelReset: boolean;
  truncated: boolean;
  outputDropped: boolean;
  /** True when outputs or the traceback were left out or shortened to keep the report within its bound. */
  elided: boolean;
  /** What the CLI left out and why, one sentence each (images not saved, outputs elided). */
  notes: string[];
  durationMs: number;
}

/**
 * The JSON length of `value`, counted up to `limit`: returns a number above `limit` as soon as it passes it, so a
 * 500 MB string costs no copy and no `RangeError`.
 */
export function jsonChars(value: unknown, limit: number): number {
  let total = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item === 'string') total += item.length + 2;
    else if (item === null || typeof item !== 'object') total += String(item).length;
    else if (Array.isArray(item)) {
      total += 2 + item.length;
      for (const entry of item) stack.push(entry);
    } else {
      for (const [key, entry] of Object.entries(item)) {
        total += key.length + 4;
        stack.push(entry);
      }
      total += 2;
    }
    if (total > limit) return total;
  }
  return total;
}

function stub(output: Output, chars: number, reason: string): ElidedOutput {
  const base: ElidedOutput = { type: output.type, elided: { chars, reason } };
  if (output.type === 'stream') return { ...base, name: output.name };
  if (output.type === 'error') return { ...base, ename: output.ename };
  return { ...base, mimeTypes: Object.keys(output.data) };
}

/** `text` cut to `max` characters, with a marker saying how much was left out. */
function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… [${text.length - max} characters elided]`;
}

/**
 * Keeps `doc` within `maxChars` of output data: outputs are kept in order while they fit, and each one that does not
 * becomes a stub (`{ type, elided: { chars, reason } }`); a traceback is shortened to fit too. `doc.elided` and a
 * note say so.
 */
export function boundReport(doc: RunReport, maxChars: number = DEFAULT_REPORT_DATA_CHARS): RunReport {
  let left = maxChars;
  let elidedOutputs = 0;
  let elidedChars = 0;
  const outputs = doc.outputs.map((output) => {
    const chars = jsonChars(output, left);
    if (chars <= left) {
      left -= chars;
      return output;
    }
    elidedOutputs++;
    elidedChars += chars;
    return stub(output as Output, chars, `past the report's ${formatSize(maxChars)} of output data`);
  });
  let error = doc.error;
  let tracebackCut = false;
  if (error && 'traceback' in error && jsonChars(error, left) > left) {
    const room = Math.max(4096, Math.floor(left / Math.max(1, error.traceback.length + 1)));
    error = {
      ename: cut(error.ename, 4096),
      evalue: cut(error.evalue, room),
      traceback: error.traceback.slice(0, 200).map((line) => cut(line, room)),
    };
    tracebackCut = true;
  }
  const notes = [...doc.notes];
  if (elidedOutputs > 0) {
    notes.push(
      `${elidedOutputs} output${elidedOutputs === 1 ? '' : 's'} (at least ${formatSize(elidedChars)} of JSON) left ` +
        `out of this report, past its ${formatSize(maxChars)} of output data; use --outputs-dir for images`,
    );
  }
  if (tracebackCut) notes.push('the traceback was shortened to fit the report');
  const elided = doc.elided || elidedOutputs > 0 || tracebackCut;
  return { ...doc, outputs, ...(error ? { error } : {}), elided, notes };
}

/**
 * The `--json` document as one line of JSON, always: bounded by `boundReport`, and should serialising still fail
 * (a `RangeError` for a string too long), a report without outputs that says why. The cell's verdict and exit code
 * are never lost to a size error.
 */
export function formatRunReport(doc: RunReport, maxChars: number = DEFAULT_REPORT_DATA_CHARS): string {
  try {
    return terminalSafeJson(boundReport(doc, maxChars));
  } catch (error) {
    const reason = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    const fallback: RunReport = {
      ...doc,
      stdout: cut(doc.stdout, 1024 * 1024),
      stderr: cut(doc.stderr, 1024 * 1024),
      outputs: [],
      elided: true,
      notes: [...doc.notes, `the outputs were left out of this report: it could not be written with them (${reason})`],
    };
    if (doc.error && 'traceback' in doc.error) {
      fallback.error = { ename: cut(doc.error.ename, 4096), evalue: cut(doc.error.evalue, 65536), traceback: [] };
    }
    try {
      return terminalSafeJson(fallback);
    } catch {
      const { exitCode, status, language, cellId, timedOut, cancelled, kernelReset, durationMs } = doc;
      return terminalSafeJson({
        exitCode,
        status,
        language,
        cellId,
        stdout: '',
        stderr: '',
        outputs: [],
        files: [],
        imagesNotSaved: doc.imagesNotSaved,
        timedOut,
        cancelled,
        kernelReset,
        truncated: doc.truncated,
        outputDropped: doc.outputDropped,
        elided: true,
        notes: [`the report could not be written with the cell's output (${reason})`],
        durationMs,
      });
    }
  }
}
