import type { Clock, Timer } from '@kernelwarden/core';
import { KernelStartError } from './errors.js';
import type { GatewayClient } from './gateway-client.js';
import type { KernelDiagnostics } from './gateway-client-options.js';

/** Options of `watchKernelStart()`. */
export interface StartWatchOptions {
  client: GatewayClient;
  kernelId: string;
  kernelName: string;
  clock: Clock;
  /** How often the kernel's process is looked for (with `client.diagnostics`). @defaultValue {@link START_PROCESS_POLL_MS} */
  processPollMs?: number;
  /** How often `GET /api/kernels/{id}` is asked. @defaultValue {@link START_REST_POLL_MS} */
  restPollMs?: number;
}

/** A watch over a starting kernel: `failed` rejects with `KernelStartError` once the kernel is known dead. */
export interface StartWatch {
  /** Never resolves; rejects when the kernel died while starting. */
  readonly failed: Promise<never>;
  /** The channel reported a `restarting` or `dead` status before the kernel ever answered. */
  statusSeen(state: 'restarting' | 'dead'): void;
  /** Stops every timer; `failed` then never settles. */
  stop(): void;
}

/** Consecutive polls that must find no process before the kernel counts as exited (a process scan can race). */
const MISSES = 2;

/** While a kernel starts, how often its process is looked for: 500 ms. */
export const START_PROCESS_POLL_MS = 500;
/** While a kernel starts, how often REST is asked about it: 1 s. */
export const START_REST_POLL_MS = 1000;
/** The shortest deadline of one of those REST requests (it is at least the poll interval): 2 s. */
export const START_REST_TIMEOUT_MS = 2000;

/**
 * Watches a kernel from its create until it first answers, so that one whose process exits while starting (a
 * bad kernelspec, a missing module) fails the start within seconds instead of at the start deadline. jupyter-server
 * (1.x and 2.x) keeps such a kernel listed as `starting` while its restarter retries (five times, 3 s apart), and
 * does not accept the channels socket meanwhile, so the socket alone says nothing. The watch notices:
 * - with a gateway on this machine (`client.diagnostics`, e.g. a `LocalGateway` ticket): no process of the kernel
 *   left, twice in a row — its stderr tail goes into the message;
 * - a `restarting` or `dead` status on the channel (a server that sends one);
 * - REST: `GET /api/kernels/{id}` answers 404 (the restarter gave up and the server dropped it) or `dead`.
 */
export function watchKernelStart(opts: StartWatchOptions): StartWatch {
  const { client, kernelId, kernelName, clock } = opts;
  const processPollMs = opts.processPollMs ?? START_PROCESS_POLL_MS;
  const restPollMs = opts.restPollMs ?? START_REST_POLL_MS;
  const diagnostics = client.diagnostics;
  let reject!: (error: KernelStartError) => void;
  const failed = new Promise<never>((_, r) => {
    reject = r;
  });
  // A start that succeeds or fails otherwise never reads `failed`: keep its rejection from being unhandled.
  failed.catch(() => {});
  let stopped = false;
  let processTimer: Timer | undefined;
  let restTimer: Timer | undefined;
  let misses = 0;
  let restInFlight = false;

  const stop = () => {
    stopped = true;
    processTimer?.cancel();
    restTimer?.cancel();
  };

  const fail = (why: string) => {
    if (stopped) return;
    stop();
    reject(startDeath(client, kernelId, kernelName, why));
  };

  const pollProcess = () => {
    processTimer = undefined;
    if (stopped || !diagnostics) return;
    misses = processAlive(diagnostics, kernelId) === false ? misses + 1 : 0;
    if (misses >= MISSES) {
      fail('its process exited');
      return;
    }
    processTimer = clock.setTimer(pollProcess, processPollMs);
  };

  const pollRest = async () => {
    restTimer = undefined;
    if (stopped || restInFlight) return;
    restInFlight = true;
    try {
      const model = await client.getKernel(kernelId, { timeoutMs: Math.max(restPollMs, START_REST_TIMEOUT_MS) });
      if (!model) fail('the server no longer lists it (its restarter gave up restarting it)');
      else if (model.execution_state === 'dead') fail('the server reports it dead');
    } catch {
      // an unanswered poll says nothing about the kernel; the start's own deadline still holds
    } finally {
      restInFlight = false;
    }
    if (!stopped) restTimer = clock.setTimer(() => void pollRest(), restPollMs);
  };

  if (diagnostics) processTimer = clock.setTimer(pollProcess, processPollMs);
  if (restPollMs > 0) restTimer = clock.setTimer(() => void pollRest(), restPollMs);

  return {
    failed,
    statusSeen(state) {
      fail(
        state === 'dead'
          ? 'its process exited and the server could not restart it'
          : 'its process exited (the server is restarting it)',
      );
    },
    stop,
  };
}

/** The error of a kernel that died while starting (`why`), with the last lines of its stderr when they are known. */
function startDeath(client: GatewayClient, kernelId: string, kernelName: string, why: string): KernelStartError {
  const tail = safeTail(client, kernelId);
  const said = tail.length > 0 ? `; its last lines of stderr:\n${tail.map((l) => `  ${l}`).join('\n')}` : '';
  return new KernelStartError(
    `Kernel ${kernelId} (${kernelName}) at ${client.baseUrl} died while starting: ${why}${said}`,
  );
}

/** Whether the kernel's process runs, as the diagnostics say; undefined when they cannot tell (they threw). */
function processAlive(diagnostics: KernelDiagnostics, kernelId: string): boolean | undefined {
  try {
    return diagnostics.processAlive(kernelId);
  } catch {
    return undefined;
  }
}

function safeTail(client: GatewayClient, kernelId: string): string[] {
  try {
    return client.diagnostics?.stderrTail(kernelId) ?? [];
  } catch {
    return [];
  }
}
