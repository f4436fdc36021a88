import type { ExecuteResult } from './types.js';

/**
 * An `ExecuteResult` with nothing in it — `status: 'ok'`, no output, nothing cancelled, timed out, requested or
 * cut — with `fields` laid over it.
 *
 * Use it wherever a result is built, so that a field added to `ExecuteResult` gets its default in one place:
 * `emptyResult(cellId, { status: 'aborted', cancelled: true })`.
 */
export function emptyResult(cellId: string, fields: Partial<ExecuteResult> = {}): ExecuteResult {
  return {
    status: 'ok',
    cellId,
    stdout: '',
    stderr: '',
    outputs: [],
    cancelled: false,
    timedOut: false,
    stdinRequested: false,
    truncated: false,
    ...fields,
  };
}
