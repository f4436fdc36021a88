/**
 * One output of a cell, in the order the kernel produced it.
 *
 * Use it to stream output to a user (`ExecuteOptions.onOutput`) or to read a finished cell (`ExecuteResult.outputs`).
 */
export type Output =
  | { type: 'stream'; name: 'stdout' | 'stderr'; text: string }
  | {
      type: 'display_data' | 'execute_result';
      data: Record<string, unknown>;
      metadata: Record<string, unknown>;
      executionCount?: number;
    }
  | { type: 'error'; ename: string; evalue: string; traceback: string[] };

/**
 * A request for input that the kernel sent while a cell ran (Python's `input()`, R's `readline()`).
 *
 * Answer it from `ExecuteOptions.onInput`.
 */
export interface InputRequest {
  /** The prompt the code printed. */
  prompt: string;
  /** True for `getpass()`-style prompts, whose answer must not be echoed or logged. */
  password: boolean;
}

/**
 * Options of one `KernelHandle.execute()` call.
 *
 * Every field is optional; pass `signal` or `timeoutMs` to bound the call.
 */
export interface ExecuteOptions {
  /** Aborting interrupts the kernel and settles the call at once with `cancelled: true`. */
  signal?: AbortSignal;
  /** Client-side deadline: like an abort, but the result says `timedOut: true`. `0` or absent disables it. */
  timeoutMs?: number;
  /** Carried to the kernel (execute_request `metadata.cellId`) and back as `result.cellId`; generated when absent. */
  cellId?: string;
  /** A free label (`"agent"`, `"user"`, …) kept on events. */
  origin?: string;
  /** Called with every output, in arrival order. */
  onOutput?: (output: Output) => void;
  /** Answers stdin requests. When absent, stdin is disallowed and code that reads input fails at once. */
  onInput?: (request: InputRequest) => string | Promise<string>;
  /** Run without broadcasting outputs or incrementing the execution count. @defaultValue false */
  silent?: boolean;
  /** Record the cell in the kernel's history. @defaultValue true */
  storeHistory?: boolean;
}

/** The error a cell raised, as the kernel reported it. */
export interface ExecuteError {
  ename: string;
  evalue: string;
  traceback: string[];
}

/**
 * What one cell produced once it finished, was cancelled or timed out.
 *
 * `status` is the kernel's own verdict; `cancelled` and `timedOut` say whether the client stopped waiting.
 */
export interface ExecuteResult {
  /** `'ok'`, `'error'` (the cell raised) or `'aborted'` (the kernel did not run the cell to its end). */
  status: 'ok' | 'error' | 'aborted';
  /** The cell id sent with the request. */
  cellId: string;
  /** The kernel's execution counter for this cell, when it reported one. */
  executionCount?: number;
  /** Stream text written to stdout, capped. */
  stdout: string;
  /** Stream text written to stderr, capped. */
  stderr: string;
  /** Every output in arrival order, capped; `truncated` says when the cap cut it. */
  outputs: Output[];
  /** The error the cell raised, when `status` is `'error'`. */
  error?: ExecuteError;
  /** The caller aborted the call (its signal or deadline). */
  cancelled: boolean;
  /** The call's `timeoutMs` ran out. */
  timedOut: boolean;
  /** The kernel asked for input during the cell. */
  stdinRequested: boolean;
  /** Our output caps cut the kept output. */
  truncated: boolean;
  /** The server dropped output (for example its iopub rate limit). */
  outputDropped?: boolean;
}

/**
 * What a `KernelHandle.kill()` did to the kernel.
 *
 * A caller that kills in order to restart (the watchdog) reads it to skip a restart the kill already made.
 */
export interface KillOutcome {
  /**
   * True when the kill already gave the handle a fresh interpreter (a Jupyter server's kill is a restart): the
   * handle is alive with no state, and a `restart()` would only start another interpreter. False when the
   * interpreter is stopped and `restart()` brings it back.
   */
  restarted: boolean;
}

/**
 * One running kernel, whatever drives it: a gateway kernel, a fake, or a user's own implementation.
 *
 * The supervisor, watchdog and session accept anything with the subset of it they need.
 */
export interface KernelHandle {
  /** A stable identifier of this kernel (the gateway's kernel id for gateway kernels). */
  readonly id: string;
  /** False once the kernel died or was shut down. */
  isAlive(): boolean;
  /** Runs one cell and resolves with its result; rejects only when the kernel cannot answer at all. */
  execute(code: string, opts?: ExecuteOptions): Promise<ExecuteResult>;
  /** Asks the kernel to interrupt the running cell; says whether the request was delivered. */
  interrupt(opts?: { signal?: AbortSignal }): Promise<{ delivered: boolean }>;
  /**
   * Hard stop of the interpreter; `restart()` may follow. Resolves with what the kill did when the kernel can tell
   * (`{ restarted: true }`: it already runs a fresh interpreter), else with nothing.
   */
  kill(opts?: { signal?: AbortSignal }): Promise<KillOutcome | void>;
  /** Same handle, fresh interpreter state. */
  restart(opts?: { signal?: AbortSignal }): Promise<void>;
  /** Stops the kernel for good. Never throws: `confirmed` says whether the stop is known to have happened. */
  shutdown(opts?: { timeoutMs?: number; signal?: AbortSignal }): Promise<{ confirmed: boolean }>;
}

/**
 * Which directories a kernel may not read (`roots`), and which directories inside them it may read again
 * (`allowedRoots`). Canonical absolute paths.
 *
 * Made and enforced by `@kernelwarden/isolation`; carried by the supervisor to every kernel factory it calls.
 */
export interface ReadIsolationPolicy {
  /** Directories hidden from the kernel. */
  readonly roots: readonly string[];
  /** Directories inside `roots` the kernel may still read. */
  readonly allowedRoots: readonly string[];
  /** The canonical system temporary directory the policy was checked against. */
  readonly tempDir?: string;
}
