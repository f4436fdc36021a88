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
 * Returns a `GatewayKernel`: the started kernel, wrapped (`instanceof`, `status`, events and every other member are
 * the kernel's own); use it wherever a `KernelHandle` goes.
 */
export async function startIRKernel(opts: IRKernelStartOptions): Promise<GatewayKernel> {
  const resolved = resolveIRKernelOptions(opts);
  const kernel = await GatewayKernel.start(resolved.start);
  return wrapKernel(kernel, new IRKernelQuirks(kernel, resolved));
}

/** What an R kernel does differently from the `GatewayKernel` it wraps: IRkernel's quirks. */
class IRKernelQuirks {
  readonly #kernel: GatewayKernel;
  readonly #shutdownTimeoutMs: number;
  readonly #processExitTimeoutMs: number;
  readonly #local: boolean;

  constructor(kernel: GatewayKernel, options: ResolvedIRKernelStartOptions) {
    this.#kernel = kernel;
    this.#shutdownTimeoutMs = options.shutdownTimeoutMs;
    this.#processExitTimeoutMs = options.processExitTimeoutMs;
    this.#local = isLoopback(kernel.client.baseUrl);
  }

  /** The kernel's `execute`, with IRkernel's bare `abort` reply turned into an interrupted result. */
  async execute(code: string, opts?: ExecuteOptions): Promise<ExecuteResult> {
    const result = await this.#kernel.execute(code, opts);
    if (result.status === 'aborted' && !result.error) return { ...result, error: { ...R_INTERRUPTED } };
    return result;
  }

  /** Interrupts a busy kernel, shuts it down, and makes sure its processes on this machine are gone. */
  async shutdown(opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<{ confirmed: boolean }> {
    const kernel = this.#kernel;
    const marker = this.#local ? kernelMarker({ kernelId: kernel.id }) : undefined;
    if (kernel.isAlive() && kernel.status === 'busy') {
      await kernel.interrupt(opts.signal ? { signal: opts.signal } : {}).catch(() => ({ delivered: false }));
    }
    const outcome = await kernel.shutdown({
      timeoutMs: opts.timeoutMs ?? this.#shutdownTimeoutMs,
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    if (outcome.confirmed && marker) await reapProcesses(marker, this.#processExitTimeoutMs);
    return outcome;
  }

  /** Shuts the kernel down as `shutdown()` does (for `await using`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.shutdown();
  }
}

/**
 * `kernel` with the quirks' `execute`, `shutdown` and `[Symbol.asyncDispose]` in place of its own; every other member
 * is read from the kernel itself (its methods bound to it), which is left as it was. The result is a `GatewayKernel`
 * (`instanceof` holds) and answers for the kernel everywhere.
 */
function wrapKernel(kernel: GatewayKernel, quirks: IRKernelQuirks): GatewayKernel {
  const replaced = new Map<PropertyKey, unknown>([
    ['execute', quirks.execute.bind(quirks)],
    ['shutdown', quirks.shutdown.bind(quirks)],
    [Symbol.asyncDispose, quirks[Symbol.asyncDispose].bind(quirks)],
  ]);
  const bound = new Map<PropertyKey, { of: unknown; fn: unknown }>();
  return new Proxy(kernel, {
    get(target, key) {
      if (replaced.has(key)) return replaced.get(key);
      const value: unknown = Reflect.get(target, key, target);
      if (typeof value !== 'function') return value;
      const known = bound.get(key);
      if (known?.of === value) return known.fn;
      const fn = (value as (...args: unknown[]) => unknown).bind(target);
      bound.set(key, { of: value, fn });
      return fn;
    },
    set(target, key, value) {
      return Reflect.set(target, key, value, target);
    },
  });
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
