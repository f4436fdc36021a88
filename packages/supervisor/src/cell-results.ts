import { emptyResult as coreEmptyResult, type ExecuteResult } from '@kernelwarden/core';
import { type KernelUnavailableError, UNAVAILABLE_KEY } from './errors.js';

/** The result of a cell that produced nothing: `status: 'aborted'`, no output, every flag false. */
export function emptyResult(cellId: string | undefined): ExecuteResult {
  return coreEmptyResult(cellId ?? globalThis.crypto.randomUUID(), { status: 'aborted' });
}

/** A cell cancelled before or while it ran (a stop, a close, the caller's signal). */
export function cancelledResult(cellId: string | undefined): ExecuteResult {
  return { ...emptyResult(cellId), cancelled: true };
}

/**
 * The answer to a cell whose language slot could not provide a kernel: `status: 'error'` with the slot's
 * `ename`/message as its error and only output, and `error` in the result, found again by
 * `KernelUnavailableError.fromResult`.
 */
export function unavailableResult(error: KernelUnavailableError, cellId: string | undefined): ExecuteResult {
  const fields = { ename: error.ename, evalue: error.message, traceback: [] as string[] };
  Object.defineProperty(fields, UNAVAILABLE_KEY, { value: error, enumerable: false });
  return { ...emptyResult(cellId), status: 'error', error: fields, outputs: [{ type: 'error', ...fields }] };
}
