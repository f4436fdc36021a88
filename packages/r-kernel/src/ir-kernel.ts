import { type ExecuteOptions, type ExecuteResult, parseOptions, sleep } from '@kernelwarden/core';
import { type EnvMarker, kernelMarker, killProcessesCarrying, processesCarrying } from '@kernelwarden/core/os';
import { GatewayKernel, type GatewayKernelStartOptions } from '@kernelwarden/gateway-client';
import { z } from 'zod/v3';

/** The kernelspec `startIRKernel` starts unless `kernelName` says otherwise. */
export const DEFAULT_IR_KERNEL_NAME = 'ir';
/**
 * Bound on an R kernel's `shutdown()` when the caller gives none: IRkernel ignores `shutdown_request` while R code
 * runs, so the server waits its `shutdown_wait_time` (5 s) before it kills the process.
 */
export const DEFAULT_IR_SHUTDOWN_TIMEOUT_MS = 15_000;
/** How long an R kernel's `shutdown()` waits for the R process to exit on a local gateway before killing it. */
export const DEFAULT_PROCESS_EXIT_TIMEOUT_MS = 3000;

/** Options of `startIRKernel()`: `GatewayKernel.start`'s, with R defaults. */
export interface IRKernelStartOptions extends Omit<GatewayKernelStartOptions, 'kernelName'> {
  /** The R kernelspec. @defaultValue {@link DEFAULT_IR_KERNEL_NAME} */
  kernelName?: string;
  /** Bound on `shutdown()` when the caller gives none. @defaultValue {@link DEFAULT_IR_SHUTDOWN_TIMEOUT_MS} */
  shutdownTimeoutMs?: number;
  /**
   * How long `shutdown()` waits for the R process to exit on a local gateway before it kills it.
   * @defaultValue {@link DEFAULT_PROCESS_EXIT_TIMEOUT_MS}
   */
  processExitTimeoutMs?: number;
}

/** `IRKernelStartOptions` validated, with the R defaults applied and the `GatewayKernel.start` options apart. */
export interface ResolvedIRKernelStartOptions {
  readonly kernelName: string;
  readonly shutdownTimeoutMs: number;
  readonly processExitTimeoutMs: number;
  /** What goes to `GatewayKernel.start` (with `kernelName`); it validates them itself. */
  readonly start: GatewayKernelStartOptions;
}

const msAtLeastZero = z.custom<number>((value) => typeof value === 'number' && value >= 0, 'expected a number >= 0');
const irKernelOptionsSchema = z.object(
  {
    kernelName: z.string().min(1, 'expected a non-empty string').optional(),
    shutdownTimeoutMs: msAtLeastZero.optional(),
    processExitTimeoutMs: msAtLeastZero.optional(),
  },
  { message: 'expected an object' },
);

/**
 * Validates `startIRKernel()`'s own options and applies their defaults; throws `InvalidOptionsError` naming the bad
 * field (`options.shutdownTimeoutMs`). The `GatewayKernel.start` options are checked when the kernel starts.
 */
export function resolveIRKernelOptions(opts: IRKernelStartOptions): ResolvedIRKernelStartOptions {
  parseOptions(irKernelOptionsSchema, opts, { subject: 'IRkernel options', root: 'options' });
  const { shutdownTimeoutMs, processExitTimeoutMs, kernelName, ...rest } = opts;
  const name = kernelName ?? DEFAULT_IR_KERNEL_NAME;
  return Object.freeze({
    kernelName: name,
    shutdownTimeoutMs: shutdownTimeoutMs ?? DEFAULT_IR_SHUTDOWN_TIMEOUT_MS,
    processExitTimeoutMs: processExitTimeoutMs ?? DEFAULT_PROCESS_EXIT_TIMEOUT_MS,
    start: { ...rest, kernelName: name },
  });
}

/** The error an interrupted R cell carries: IRkernel replies `status: 'abort'` with no error of its own. */
export const R_INTERRUPTED = {
  ename: 'Interrupted',
  evalue: 'The R cell was interrupted before it finished',
  traceback: [] as string[],
};

/**
 * Starts an R kernel (IRkernel) through a Jupyter gateway, with IRkernel's quirks handled.
 *
 * - Interrupts go through the REST API (a signal): IRkernel ignores `interrupt_request` messages, and
 *   `GatewayKernel.interrupt()` never sends one.
 * - An interrupted cell comes back as `status: 'aborted'` with an `Interrupted` error, instead of IRkernel's bare
 *   `abort` that looks neither failed nor finished.
 * - No heartbeat or other request is expected while R code runs (IRkernel services nothing then); liveness is
 *   judged from the socket and the REST listing.
 * - `shutdown()` interrupts a busy kernel first so it can honour the shutdown request, waits long enough for the
 *   server's kill fallback, and on a loopback gateway that marks its kernels' processes (the embedded LocalGateway:
 *   `KERNELWARDEN_KERNEL=<instance>:<kernel id>`) makes sure every process of the kernel has exited (IRkernel does
 *   not exit when its parent dies), killing what is left.
 *
 * Returns the `GatewayKernel` itself; use it wherever a `KernelHandle` goes.
 */
export async function startIRKernel(opts: IRKernelStartOptions): Promise<GatewayKernel> {
  const { shutdownTimeoutMs, processExitTimeoutMs, start } = resolveIRKernelOptions(opts);
  const kernel = await GatewayKernel.start(start);
  const baseUrl = kernel.client.baseUrl;
  const local = isLoopback(baseUrl);

  const execute = kernel.execute.bind(kernel);
  const shutdown = kernel.shutdown.bind(kernel);
  Object.defineProperties(kernel, {
    execute: {
      configurable: true,
      value: async (code: string, execOpts?: ExecuteOptions): Promise<ExecuteResult> => {
        const result = await execute(code, execOpts);
        if (result.status === 'aborted' && !result.error) return { ...result, error: { ...R_INTERRUPTED } };
        return result;
      },
    },
    shutdown: {
      configurable: true,
      value: async (shutdownOpts: { timeoutMs?: number; signal?: AbortSignal } = {}) => {
        const marker = local ? kernelMarker({ kernelId: kernel.id }) : undefined;
        if (kernel.isAlive() && kernel.status === 'busy') {
          await kernel
            .interrupt(shutdownOpts.signal ? { signal: shutdownOpts.signal } : {})
            .catch(() => ({ delivered: false }));
        }
        const outcome = await shutdown({
          timeoutMs: shutdownOpts.timeoutMs ?? shutdownTimeoutMs,
          ...(shutdownOpts.signal ? { signal: shutdownOpts.signal } : {}),
        });
        if (outcome.confirmed && marker) await reapProcesses(marker, processExitTimeoutMs);
        return outcome;
      },
    },
  });
  return kernel;
}

function isLoopback(baseUrl: string): boolean {
  try {
    const host = new URL(baseUrl).hostname;
    return host === 'localhost' || host === '[::1]' || host === '::1' || /^127\./.test(host);
  } catch {
    return false;
  }
}

/** Waits up to `timeoutMs` for every process carrying `marker` to exit, then kills those left. */
async function reapProcesses(marker: EnvMarker, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (processesCarrying(marker).length > 0 && Date.now() < deadline) await sleep(50);
  killProcessesCarrying(marker);
}
