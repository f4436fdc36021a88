// How a `run_code` cell ended, told to the model: an error or not, the notice that says why, and whether it told
// the model that the kernel lost its variables.
import { type ExecuteResult, KernelwardenError } from '@kernelwarden/core';
import { KernelUnavailableError, UnknownLanguageError } from '@kernelwarden/supervisor';
import { CellTimeoutError } from '@kernelwarden/watchdog';
import type { KernelLanguage } from './cell-run.js';
import { messageOf, seconds } from './tool-text.js';

/** What is known of a cell once it ended. */
export interface CellEnd {
  language: KernelLanguage;
  label: string;
  result: ExecuteResult | undefined;
  failure: unknown;
  stoppedBy: 'timeout' | 'cancel' | undefined;
  timeoutMs: number;
  resetDuringCall: boolean;
  /** Whether the slot holds a live kernel once the cell has failed (a replacement, when the cell's kernel died). */
  restarted: boolean;
}

/** What the model is told of a cell's end. */
export interface CellOutcome {
  isError: boolean;
  notice?: string;
  /** The notice says the kernel lost its variables: no later call repeats it. */
  toldReset: boolean;
}

/** How the cell described by `c` ended, for the model. */
export function describeOutcome(c: CellEnd): CellOutcome {
  const { label, result, failure, stoppedBy } = c;
  const lost = `variables from earlier calls are gone: re-run the imports and setup your next cells need`;
  const why = stoppedBy === 'timeout' ? `ran past its ${seconds(c.timeoutMs)} timeout` : 'was cancelled by the client';
  if (stoppedBy && c.resetDuringCall) {
    return {
      isError: true,
      toldReset: true,
      notice: `The cell ${why} and did not stop when interrupted, so the ${label} kernel was restarted: ${lost}.`,
    };
  }
  if (failure !== undefined) {
    if (CellTimeoutError.isInstance(failure)) return { isError: true, toldReset: true, notice: failure.message };
    if (KernelwardenError.isInstance(failure) && failure.code === 'GATEWAY_DOWN') {
      return { isError: true, toldReset: true, notice: gatewayDownNotice(label, failure, c.restarted, lost) };
    }
    if (KernelwardenError.isInstance(failure) && failure.code === 'KERNEL_DIED') {
      return {
        isError: true,
        toldReset: true,
        notice: `The ${label} kernel died while running the cell (${failure.message}). It was restarted: ${lost}.`,
      };
    }
    if (UnknownLanguageError.isInstance(failure)) {
      return { isError: true, toldReset: false, notice: `This server has no ${label} kernel.` };
    }
    return {
      isError: true,
      toldReset: false,
      notice: `The ${label} kernel could not run the cell: ${messageOf(failure)}`,
    };
  }
  if (stoppedBy || result?.timedOut || result?.cancelled) {
    const what =
      stoppedBy === 'cancel'
        ? 'was cancelled by the client'
        : stoppedBy
          ? why
          : result?.timedOut
            ? 'ran past its timeout'
            : 'was stopped by the session (a kernel restart, or the server shutting down)';
    return {
      isError: true,
      toldReset: false,
      notice: `The cell ${what} and was interrupted; the ${label} kernel kept its variables (the cell's own work may be incomplete).`,
    };
  }
  if (result?.status === 'error') {
    const unavailable = KernelUnavailableError.fromResult(result) !== undefined;
    return {
      isError: true,
      toldReset: false,
      ...(unavailable && c.language !== 'python' ? { notice: 'Python cells are not affected.' } : {}),
    };
  }
  return { isError: false, toldReset: false };
}

/**
 * What the model is told when the gateway running a cell went down (`GatewayDownError`): which gateway, that the
 * kernel and its variables are lost, and whether a replacement kernel was started.
 */
function gatewayDownNotice(label: string, failure: KernelwardenError, restarted: boolean, lost: string): string {
  const url = (failure as { url?: unknown }).url;
  const gateway = typeof url === 'string' ? `The gateway ${url}` : 'The gateway';
  const restart = restarted
    ? `A new ${label} kernel was started in its place (on a gateway that answers): ${lost}.`
    : `No restart was attempted: the next call starts a new ${label} kernel (on another gateway if one answers), and ${lost}.`;
  return `${gateway} went down while the ${label} cell ran (it stopped answering), so the ${label} kernel on it was lost. ${restart}`;
}
