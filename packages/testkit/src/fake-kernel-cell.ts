// One `execute_request` as a FakeKernel runs it: why it stopped early, what its script can wait on, and how a
// failed cell is answered.
import { type Clock, sleep } from '@kernelwarden/core';
import type { JupyterMessage } from '@kernelwarden/jupyter-protocol';

/** A channel of the kernel's messages. */
export type Channel = 'iopub' | 'shell' | 'stdin' | 'control';

/** Why a cell stopped early; internal to the fake. */
export class Interrupted extends Error {}
export class Abandoned extends Error {}
export class Raised extends Error {
  constructor(
    readonly ename: string,
    readonly evalue: string,
    readonly traceback: string[],
  ) {
    super(`${ename}: ${evalue}`);
  }
}

/** The cell a kernel is running: its request, what aborts it, and who waits for an `input_reply`. */
export interface Running {
  readonly request: JupyterMessage;
  readonly controller: AbortController;
  readonly fromSession: string | undefined;
  stdinWaiter: ((value: string) => void) | undefined;
}

/**
 * What a cell's script can raise and wait on (`raise`, `sleep`, `input`, `hang`), bound to the running cell: each wait
 * ends with the cell's abort reason when it is interrupted or abandoned.
 */
export function cellWaits(
  running: Running,
  content: Readonly<Record<string, unknown>>,
  clock: Clock,
  emit: (channel: Channel, type: string, content: Record<string, unknown>) => void,
) {
  const signal = running.controller.signal;
  const check = () => {
    if (signal.aborted) throw signal.reason;
  };
  return {
    raise: (ename: string, evalue: string, traceback?: string[]): never => {
      throw new Raised(ename, evalue, traceback ?? [`${ename}: ${evalue}`]);
    },
    sleep: async (ms: number): Promise<void> => {
      check();
      await sleep(ms, { clock, signal });
    },
    input: async (prompt = '', opts: { password?: boolean } = {}): Promise<string> => {
      check();
      if (content.allow_stdin === false) {
        throw new Raised(
          'StdinNotImplementedError',
          'raw_input was called, but this frontend does not support input requests.',
          [],
        );
      }
      return new Promise<string>((resolve, reject) => {
        const onAbort = () => reject(signal.reason);
        running.stdinWaiter = (value) => {
          signal.removeEventListener('abort', onAbort);
          resolve(value);
        };
        signal.addEventListener('abort', onAbort, { once: true });
        emit('stdin', 'input_request', { prompt, password: opts.password ?? false });
      });
    },
    hang: () =>
      new Promise<never>((_, reject) => {
        if (signal.aborted) reject(signal.reason);
        else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      }),
  };
}

/**
 * The `execute_reply` of a cell whose script threw `error`, and the exception to publish on iopub before it (none
 * for an interrupt answered `status: 'abort'`, as IRkernel does).
 */
export function failedReply(
  error: unknown,
  executionCount: number,
  interruptReply: 'error' | 'abort',
): { reply: Record<string, unknown>; raised: Raised | undefined } {
  if (error instanceof Interrupted && interruptReply === 'abort')
    return { reply: { status: 'abort' }, raised: undefined };
  const raised =
    error instanceof Raised
      ? error
      : error instanceof Interrupted
        ? new Raised('KeyboardInterrupt', '', ['KeyboardInterrupt: '])
        : new Raised((error as Error)?.name ?? 'Error', (error as Error)?.message ?? String(error), [
            String((error as Error)?.stack ?? error),
          ]);
  const reply = {
    status: 'error',
    execution_count: executionCount,
    ename: raised.ename,
    evalue: raised.evalue,
    traceback: raised.traceback,
  };
  return { reply, raised };
}
