import { type ExecuteResult, InvalidOptionsError, KernelwardenError } from '@kernelwarden/core';
import { GatewayDownError, KernelDiedError, MISSING_REPLY_ENAME } from '@kernelwarden/gateway-client';
import type { IsolationUnavailableError } from '@kernelwarden/isolation';
import { KernelUnavailableError } from '@kernelwarden/supervisor';
import { CellTimeoutError } from '@kernelwarden/watchdog';
import { ExitCode } from './exit-code.js';
import { InvalidSourceError } from './source-input.js';
import { terminalSafe } from './terminal-text.js';
import { UsageError } from './usage-error.js';

const GATEWAY_CODES = new Set(['GATEWAY_UNAVAILABLE', 'GATEWAY_AUTH', 'KERNEL_START']);
/** A gateway that could not start a kernel now but may later: exit 3 like any start failure, said to be temporary. */
const TEMPORARY_CODES: Record<string, string> = {
  GATEWAY_BUSY: 'the gateway is busy starting other kernels',
  GATEWAY_CAPACITY: 'the gateway is at its kernel limit',
};

function temporaryHint(code: string | undefined): string | undefined {
  const why = code === undefined ? undefined : TEMPORARY_CODES[code];
  return why === undefined
    ? undefined
    : `This failure is temporary (${why}): the same command may succeed if retried later.`;
}

/** What the CLI tells the user about an error, and the exit code it leaves with. */
export interface Failure {
  exitCode: ExitCode;
  /** One or more lines for stderr, without the `kernelwarden:` prefix. */
  message: string;
  /** The error's stable code, when it has one (`GATEWAY_UNAVAILABLE`). */
  code: string | undefined;
}

/**
 * The exit code of a cell that answered with `result`: a kernel that could not start (an R slot's soft failure,
 * recognised by its `KernelUnavailableError`) exits 3 like a gateway that cannot start one; a kernel that went idle
 * without replying exits 70 (it broke the protocol, the cell did not raise); a timeout 124; a cancelled cell (or one
 * the user interrupted) 130; else 0 for `ok` and 1 for a cell that raised.
 */
export function resultExitCode(result: ExecuteResult, interrupted: boolean): ExitCode {
  if (KernelUnavailableError.fromResult(result)) return ExitCode.gatewayUnavailable;
  if (result.error?.ename === MISSING_REPLY_ENAME) return ExitCode.internal;
  if (result.timedOut) return ExitCode.timedOut;
  if (result.cancelled || interrupted) return ExitCode.interrupted;
  return result.status === 'ok' ? ExitCode.ok : ExitCode.cellError;
}

/**
 * Classifies an error that ended a command: gateway problems exit 3 (a busy or full gateway too, said to be
 * temporary), isolation or a limit that cannot be enforced exits 4, a kernel that died under the cell exits 5, a
 * gateway that went down under the cell (`GATEWAY_DOWN`) exits 6 with one line naming it, a cell the watchdog had
 * to reset exits 124, bad input (a bad flag, a source that is not UTF-8) exits 2, anything else 70.
 *
 * Use it wherever a command catches; the message never contains a token (kernelwarden errors never carry one), and
 * its control characters are shown escaped (it may quote a kernel's own error or a hostile file name).
 */
export function describeFailure(error: unknown): Failure {
  const failure = classify(error);
  return { ...failure, message: terminalSafe(failure.message, { colors: false }) };
}

function classify(error: unknown): Failure {
  const message = error instanceof Error ? error.message : String(error);
  // A kernel factory's failure arrives wrapped (the supervisor's KernelFactoryError): classify by the root cause
  // (a gateway or isolation error) and keep the outer message, which names the slot and the reason.
  const root = rootCause(error);
  if (root !== error) {
    const inner = classify(root);
    if (inner.exitCode !== ExitCode.internal) {
      const hint = temporaryHint(inner.code);
      return { ...inner, message: hint === undefined ? message : `${message}\n${hint}` };
    }
  }
  const code = KernelwardenError.isInstance(error) ? error.code : undefined;
  if (CellTimeoutError.isInstance(error)) {
    return {
      exitCode: ExitCode.timedOut,
      code,
      // The watchdog's messages say what happened to the kernel (reset, abandoned, restart failed) and what to do.
      message: message.replace(/\(policy cellTimeoutMs, or KERNELWARDEN_CELL_TIMEOUT in seconds\)/, '(--timeout)'),
    };
  }
  if (
    UsageError.isInstance(error) ||
    InvalidSourceError.isInstance(error) ||
    InvalidOptionsError.isInstance(error) ||
    code === 'ISOLATION_POLICY' ||
    code === 'PYTHON_INTERPRETER'
  ) {
    return { exitCode: ExitCode.usage, code, message };
  }
  // Told by code (the isolation package is loaded only by commands that use it).
  if (code === 'ISOLATION_UNAVAILABLE') {
    const { reason, limit } = error as IsolationUnavailableError;
    // A limit refused for a remote gateway says all there is to say; anything else points at what the doctor shows.
    const remoteLimit = reason === 'remote-gateway' && limit !== undefined;
    const what =
      limit !== undefined ? 'which limits can be enforced here, and by what' : 'what read isolation needs here';
    return {
      exitCode: ExitCode.isolationUnavailable,
      code,
      message: remoteLimit ? message : `${message}\nRun 'kernelwarden doctor' to see ${what}.`,
    };
  }
  if (code === 'GATEWAY_DOWN') {
    // One line: which gateway, what became of the kernel, and that nothing was restarted (the run ends here).
    const url = GatewayDownError.isInstance(error) ? ` ${error.url}` : '';
    return {
      exitCode: ExitCode.gatewayDown,
      code,
      message: `the gateway${url} went down while the cell ran (it stopped answering): its kernel is lost with its state, and no restart was attempted`,
    };
  }
  if (KernelDiedError.isInstance(error) && error.reason !== 'connection-lost') {
    // Its message says what became of the kernel: restarted by the server (variables gone), or dead for good.
    return { exitCode: ExitCode.kernelDied, code, message };
  }
  const hint = temporaryHint(code);
  if (hint !== undefined) return { exitCode: ExitCode.gatewayUnavailable, code, message: `${message}\n${hint}` };
  if (code !== undefined && (GATEWAY_CODES.has(code) || KernelDiedError.isInstance(error))) {
    // A connection to the gateway that could not be reopened is the gateway's failure, not the kernel's.
    return { exitCode: ExitCode.gatewayUnavailable, code, message };
  }
  return {
    exitCode: ExitCode.internal,
    code,
    message: error instanceof Error && !KernelwardenError.isInstance(error) ? (error.stack ?? message) : message,
  };
}

/** The innermost kernelwarden error in `error`'s cause chain (or `error` itself). */
function rootCause(error: unknown): unknown {
  let current = error;
  for (let depth = 0; depth < 8; depth++) {
    const cause = (current as { cause?: unknown } | null)?.cause;
    if (!KernelwardenError.isInstance(cause)) break;
    current = cause;
  }
  return current;
}
