import { type Clock, InvalidOptionsError, isClock, lazy, systemClock } from '@kernelwarden/core';
import type { z } from 'zod/v3';
import { DEFAULT_OUTPUT_CAPS, type OutputCaps } from './cell-output.js';
import type { ReconnectPolicy, WireProtocol } from './channel.js';
import { GatewayClient, type GatewayClientOptions, type GatewaySetLike } from './gateway-client.js';
import { KERNEL_ID_PATTERN } from './kernel-id.js';
import { checkCreateEnv } from './launch-env.js';
import type { RecoveryPolicy } from './restart-recovery.js';
import type { CleanupRetryPolicy } from './start-cleanup.js';
import { parseOptions } from './validation.js';
import { zod } from './zod.js';

/** The kernelspec `GatewayKernel.start()` launches when `kernelName` is not given. */
export const DEFAULT_KERNEL_NAME = 'python3';
/** The one deadline over create, connect, handshake, environment and prelude: 60 s. */
export const DEFAULT_STARTUP_TIMEOUT_MS = 60_000;
/**
 * The start deadline on an Enterprise Gateway (`flavor: 'enterprise-gateway'`) when `startupTimeoutMs` is not given:
 * 300 s, room for a Kubernetes pod to be scheduled and its image pulled. `KERNEL_LAUNCH_TIMEOUT` is sent as what
 * the deadline leaves once connecting is provided for (295 s by default).
 */
export const DEFAULT_REMOTE_STARTUP_TIMEOUT_MS = 300_000;
/** The wire format negotiation: offer v1, fall back to legacy. */
export const DEFAULT_PROTOCOL: WireProtocol = 'auto';
/**
 * The largest channels frame accepted when `maxFrameBytes` is not given: 64 MiB. A larger frame (a huge output) is a
 * protocol error, and the socket is reopened.
 */
export const DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024;
/** The stall workaround (unsolicited pongs) is on. */
export const DEFAULT_STALL_WORKAROUND = true;
/** A start waits for its environment step (`environmentStep`). */
export const DEFAULT_ENVIRONMENT_STEP: EnvironmentStep = 'wait';
/** Reopening a dropped channels socket: 6 attempts, 100 ms doubling up to 3 s, each open bounded at 10 s. */
export const DEFAULT_RECONNECT: ReconnectPolicy = {
  attempts: 6,
  initialDelayMs: 100,
  maxDelayMs: 3000,
  attemptTimeoutMs: 10_000,
};
/** The liveness poll's interval while cells are in flight and the socket is quiet: 2 s. */
export const DEFAULT_LIVENESS_POLL_MS = 2000;
/** The deadline of each REST check of the liveness poll and of the reconnect loop: 5 s. */
export const DEFAULT_LIVENESS_TIMEOUT_MS = 5000;
/** The heartbeat's silence before a ping, and the ping's wait for an answer: 15 s. */
export const DEFAULT_HEARTBEAT_MS = 15_000;
/** The interval between `kernel_info_request`s until the first reply: 1 s. */
export const DEFAULT_KERNEL_INFO_RETRY_MS = 1000;
/** After the first `kernel_info_reply`, the interval between the nudges that wait for iopub: 250 ms. */
export const DEFAULT_IOPUB_NUDGE_MS = 250;
/** After the first `kernel_info_reply`, the nudges sent before a kernel that publishes no status is accepted. */
export const DEFAULT_IOPUB_NUDGES = 6;
/** The longest requests wait for an interrupted cell's reply: 3 s. */
export const DEFAULT_INTERRUPT_DRAIN_MS = 3000;
/** After a cell's reply, the silence that completes it without its lost idle: 5 s. */
export const DEFAULT_IDLE_GRACE_MS = 5000;
/**
 * How long a cell waits for its `execute_reply` once the kernel went `idle` for it: ipykernel replies before it
 * goes idle, so a reply that has not come by then never will (its handler failed, e.g. on code with a NUL). 3 s.
 */
export const DEFAULT_REPLY_GRACE_MS = 3000;
/**
 * A dropped socket is resumed from the kernel's journal whenever the kernel's server keeps one (the embedded gateway);
 * on any other server it is resumed as that server replays (see the README's journal section).
 */
export const DEFAULT_RESUME_FROM_JOURNAL = true;
/** `stop_on_error` is off: each cell stands alone. */
export const DEFAULT_STOP_ON_ERROR = false;
/** `POST /api/kernels` attempts while it answers 5xx. */
export const DEFAULT_CREATE_ATTEMPTS = 3;
/** The wait before the n-th retry of a create that answered 5xx is n times this: 200 ms. */
export const DEFAULT_CREATE_RETRY_DELAY_MS = 200;
/** The bound on `POST …/restart` of `restart()` and `kill()`: 120 s. */
export const DEFAULT_RESTART_TIMEOUT_MS = 120_000;
/** Reconnecting after a server auto-restart: 120 s in all, attempts bounded at 5 s, 10 s, 15 s, 15 s … */
export const DEFAULT_RECOVERY: RecoveryPolicy = {
  timeoutMs: 120_000,
  attemptTimeoutMs: 5000,
  maxAttemptTimeoutMs: 15_000,
};
/** The deadline of `shutdown()`'s DELETE when the call gives no `timeoutMs`: 5 s. */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 5000;
/** The bound on each DELETE that cleans up after a failed start: 2 s. */
export const DEFAULT_CLEANUP_TIMEOUT_MS = 2000;
/** Default `abandonedCreateWaitMs`. */
export const DEFAULT_ABANDONED_CREATE_WAIT_MS = 60_000;
/** The DELETEs after a failed start until one is confirmed: 6 in all, 250 ms doubling up to 4 s apart. */
export const DEFAULT_CLEANUP_RETRY: CleanupRetryPolicy = { attempts: 6, initialDelayMs: 250, maxDelayMs: 4000 };

/** Options of `GatewayKernel.start()`. */
export interface GatewayKernelStartOptions {
  /**
   * A `GatewayClient`, the options to build one (`{ baseUrl, token?, ownership?, fetch?, WebSocket? }`), or a
   * `GatewaySet` (the kernel goes to the gateway its placement chooses).
   */
  gateway: GatewayClient | GatewayClientOptions | GatewaySetLike;
  /** The kernelspec to launch. @defaultValue {@link DEFAULT_KERNEL_NAME} */
  kernelName?: string;
  /** Working directory the kernel switches to before the prelude (Python and R kernels). */
  cwd?: string;
  /** Environment variables set in the kernel before the prelude (Python and R kernels). */
  env?: Record<string, string>;
  /**
   * Variables sent with the create as its `env`, for the gateway's launch of the kernel: Enterprise Gateway's
   * `KERNEL_*` parameters (`KERNEL_NAMESPACE`, `KERNEL_IMAGE`, `KERNEL_UID`, …; it drops other names unless allowed by
   * its `client_envs`), Kernel Gateway's `KERNEL_*` variables. `KERNEL_ID`, `KERNEL_USERNAME` (unless given here) and
   * `KERNEL_LAUNCH_TIMEOUT` are added by the start. Checked against Enterprise Gateway's rules on every gateway
   * (`KernelEnvError`); jupyter-server ignores them. Unlike `env`, nothing here is set inside the interpreter by
   * kernelwarden.
   */
  launchEnv?: Record<string, string>;
  /** Code run (silently) once the kernel is ready; a failing prelude fails the start. */
  prelude?: string;
  /**
   * When the start's environment step (`cwd`, `env`) is waited for. `'wait'`: the start resolves once it ran, and
   * rejects with `KernelStartError` if it failed. `'ahead'`: on an IPython kernel without a `prelude`, the start sends
   * it and resolves, so the first cell follows it without a round trip between them (the kernel runs them in that
   * order); if it fails, no later cell runs any code in that kernel (the step makes each one raise instead), and every
   * unsettled execution, and every later one, rejects with the step's `KernelStartError`. Other kernels wait.
   * @defaultValue {@link DEFAULT_ENVIRONMENT_STEP}
   */
  environmentStep?: EnvironmentStep;
  /**
   * Aborts the start: it rejects at once with the signal's reason, and the kernel (if created) is deleted in the
   * background, retried as `cleanupRetry` says until the gateway confirms it.
   */
  signal?: AbortSignal;
  /**
   * One deadline for create, connect, handshake, environment and prelude; `0` disables it.
   * @defaultValue {@link DEFAULT_STARTUP_TIMEOUT_MS}; {@link DEFAULT_REMOTE_STARTUP_TIMEOUT_MS} on an Enterprise Gateway
   */
  startupTimeoutMs?: number;
  /** Wire format: `'auto'` negotiates v1 and falls back to legacy. @defaultValue {@link DEFAULT_PROTOCOL} */
  protocol?: WireProtocol;
  /**
   * The largest frame the channels socket accepts, in bytes (`ws`'s `maxPayload`, checked before the frame is
   * buffered). A larger frame is reported as `protocol-error`, the socket is reopened, and the cell it belonged to
   * loses that message. @defaultValue {@link DEFAULT_MAX_FRAME_BYTES}
   */
  maxFrameBytes?: number;
  /**
   * Send an unsolicited WebSocket pong after each received message while a request is pending (only with the
   * `ws` library): removes the ~40 ms Nagle / delayed-ACK stall of stock jupyter-server (see `PongPolicy`).
   * @defaultValue {@link DEFAULT_STALL_WORKAROUND}
   */
  stallWorkaround?: boolean;
  /** How much output a result keeps. @defaultValue {@link DEFAULT_OUTPUT_CAPS} */
  outputCaps?: Partial<OutputCaps>;
  /** Reopening a dropped channels socket. @defaultValue {@link DEFAULT_RECONNECT} */
  reconnect?: Partial<ReconnectPolicy>;
  /**
   * While executions are pending and the socket has been quiet this long, ask the REST API whether the kernel
   * still exists (a vanished kernel fails them with `KernelDiedError`). `0` disables polling; the heartbeat is
   * independent of it. @defaultValue {@link DEFAULT_LIVENESS_POLL_MS}
   */
  livenessPollMs?: number;
  /**
   * The deadline of each REST request that checks whether the kernel still exists (the liveness poll, a dropped
   * socket, a failed recovery); `0` disables it. @defaultValue {@link DEFAULT_LIVENESS_TIMEOUT_MS}
   */
  livenessTimeoutMs?: number;
  /**
   * With the `ws` library: while executions are pending, a socket silent this long is pinged, and one that then
   * stays silent as long again is taken for hung and reopened (its cells keep waiting for the replayed output).
   * `0` disables it. @defaultValue {@link DEFAULT_HEARTBEAT_MS}
   */
  heartbeatMs?: number;
  /**
   * Interval between `kernel_info_request` retries until the first reply. The handshake also waits for the
   * request's `status` on iopub (see `iopubNudgeMs`), so that iopub is known to be subscribed before the first
   * cell runs. @defaultValue {@link DEFAULT_KERNEL_INFO_RETRY_MS}
   */
  kernelInfoRetryMs?: number;
  /** After the first `kernel_info_reply`, the interval of the nudges that wait for iopub. @defaultValue {@link DEFAULT_IOPUB_NUDGE_MS} */
  iopubNudgeMs?: number;
  /**
   * After the first `kernel_info_reply`, how many nudges are sent before a kernel that never publishes a status
   * for kernel_info is accepted. @defaultValue {@link DEFAULT_IOPUB_NUDGES}
   */
  iopubNudges?: number;
  /**
   * After a cancelled cell is interrupted, later requests wait this long at most for its reply, so the kernel's
   * `stop_on_error` does not abort them. @defaultValue {@link DEFAULT_INTERRUPT_DRAIN_MS}
   */
  interruptDrainMs?: number;
  /**
   * After a cell's `execute_reply`, how long the socket may stay silent before the cell completes without its
   * `status: idle`, with `outputDropped: true`: a server that fell behind a chatty kernel can lose the idle with
   * the output before it (ZMQ drops iopub past its high-water mark), and the cell would otherwise never complete.
   * Any message arriving restarts the wait. `0` waits for the idle for ever. @defaultValue {@link DEFAULT_IDLE_GRACE_MS}
   */
  idleGraceMs?: number;
  /**
   * After the kernel's `status: idle` for a cell whose `execute_reply` has not come, how long to wait for it before
   * the cell completes with status `'error'` and `error.ename` `'KernelProtocolError'` (ipykernel goes idle without a
   * reply when its handler fails, e.g. on code with a NUL character; the cell would otherwise wait for its timeout).
   * The wait restarts while messages keep arriving. `0` waits for the reply for ever.
   * @defaultValue {@link DEFAULT_REPLY_GRACE_MS}
   */
  replyGraceMs?: number;
  /**
   * On a server that keeps a journal of the kernel (the embedded gateway), read the kernel's iopub from it from the
   * moment the channels socket drops until the reopened socket can take over: every message once, in order, nothing
   * dropped. Off (and on a server without a journal), a drop is resumed as the server replays (what it could not
   * replay is flagged `outputDropped`).
   * @defaultValue {@link DEFAULT_RESUME_FROM_JOURNAL}
   */
  resumeFromJournal?: boolean;
  /**
   * Sent as `stop_on_error` with every cell: when true, ipykernel aborts the requests already queued behind a cell
   * that raised — including one sent right after the error, in a race. Off, each cell stands alone.
   * @defaultValue {@link DEFAULT_STOP_ON_ERROR}
   */
  stopOnError?: boolean;
  /** Attempts at `POST /api/kernels` while it answers 5xx. @defaultValue {@link DEFAULT_CREATE_ATTEMPTS} */
  createAttempts?: number;
  /** The wait before the n-th retry of a create is n times this. @defaultValue {@link DEFAULT_CREATE_RETRY_DELAY_MS} */
  createRetryDelayMs?: number;
  /**
   * The bound on `POST …/restart` of `restart()` and `kill()` (the server kills a kernel that ignores its shutdown
   * request, then starts a new one); `0` disables it. @defaultValue {@link DEFAULT_RESTART_TIMEOUT_MS}
   */
  restartTimeoutMs?: number;
  /**
   * Reconnecting after the server restarted the kernel on its own: one deadline over all attempts, and each
   * attempt's bound on its reopen and handshake (growing by `attemptTimeoutMs` up to `maxAttemptTimeoutMs`).
   * @defaultValue {@link DEFAULT_RECOVERY}
   */
  recovery?: Partial<RecoveryPolicy>;
  /** The deadline of `shutdown()`'s DELETE when the call gives none. @defaultValue {@link DEFAULT_SHUTDOWN_TIMEOUT_MS} */
  shutdownTimeoutMs?: number;
  /**
   * Bound on each DELETE that cleans up after a failed start; `0` disables it. A start that failed on its own (not
   * aborted) waits for the first DELETE, so the kernel is normally gone when it rejects.
   * @defaultValue {@link DEFAULT_CLEANUP_TIMEOUT_MS}
   */
  cleanupTimeoutMs?: number;
  /**
   * Retries of the cleanup DELETE while the gateway does not confirm it (an error, a hang past `cleanupTimeoutMs`):
   * `attempts` DELETEs in all, waiting `initialDelayMs` before the second and doubling up to `maxDelayMs`, on
   * `clock`, in the background. If every attempt fails, or the process exits first, the kernel stays recorded with
   * the gateway's ownership (`LocalGateway` tickets) and its orphan sweep deletes it on the next acquire.
   * @defaultValue {@link DEFAULT_CLEANUP_RETRY}
   */
  cleanupRetry?: Partial<CleanupRetryPolicy>;
  /**
   * After a start gives up on its create (its deadline, the caller's abort), how long the unanswered
   * `POST /api/kernels` is still awaited, so that a late answer's kernel is deleted; past it the request is dropped
   * and the chosen id deleted once more. `0` awaits the answer without bound.
   * @defaultValue {@link DEFAULT_ABANDONED_CREATE_WAIT_MS}
   */
  abandonedCreateWaitMs?: number;
  /** The clock for every timer of this kernel. @defaultValue systemClock */
  clock?: Clock;
}

/** Options of `GatewayKernel.connect()`: the start's options, and the kernel to attach to instead of a kernelspec. */
export interface GatewayKernelConnectOptions extends Omit<GatewayKernelStartOptions, 'kernelName'> {
  /** The id of the gateway's kernel to attach to. */
  kernelId: string;
}

/** `GatewayKernelStartOptions` validated, with every default applied and `gateway` made a `GatewayClient`. */
/** When a start's environment step is waited for (`GatewayKernelStartOptions.environmentStep`). */
export type EnvironmentStep = 'wait' | 'ahead';

export interface ResolvedGatewayKernelOptions {
  readonly client: GatewayClient;
  readonly kernelName: string;
  readonly cwd: string | undefined;
  readonly env: Readonly<Record<string, string>> | undefined;
  readonly launchEnv: Readonly<Record<string, string>> | undefined;
  readonly prelude: string | undefined;
  readonly environmentStep: EnvironmentStep;
  readonly signal: AbortSignal | undefined;
  readonly startupTimeoutMs: number;
  readonly protocol: WireProtocol;
  readonly maxFrameBytes: number;
  readonly stallWorkaround: boolean;
  readonly outputCaps: Readonly<OutputCaps>;
  readonly reconnect: Readonly<ReconnectPolicy>;
  readonly livenessPollMs: number;
  readonly livenessTimeoutMs: number;
  readonly heartbeatMs: number;
  readonly kernelInfoRetryMs: number;
  readonly iopubNudgeMs: number;
  readonly iopubNudges: number;
  readonly interruptDrainMs: number;
  readonly idleGraceMs: number;
  readonly replyGraceMs: number;
  readonly resumeFromJournal: boolean;
  readonly stopOnError: boolean;
  readonly createAttempts: number;
  readonly createRetryDelayMs: number;
  readonly restartTimeoutMs: number;
  readonly recovery: Readonly<RecoveryPolicy>;
  readonly shutdownTimeoutMs: number;
  readonly cleanupTimeoutMs: number;
  readonly abandonedCreateWaitMs: number;
  readonly cleanupRetry: Readonly<CleanupRetryPolicy>;
  readonly clock: Clock;
}

/** The start options' schema, built on the first start (importing this module does not load zod). */
const startSchema = lazy(() => {
  const { z } = zod();
  const ms = z.number().finite().min(0);
  const policy = <T extends z.ZodRawShape>(shape: T) => z.object(shape).partial().optional();
  return z.object({
    gateway: z.custom<GatewayClient | GatewayClientOptions | GatewaySetLike>(
      (v) => typeof v === 'object' && v !== null,
      'must be a GatewayClient or { baseUrl, token? }',
    ),
    kernelName: z.string().min(1).optional(),
    kernelId: z
      .string()
      .regex(KERNEL_ID_PATTERN, 'must be a kernel id: 1 to 128 letters, digits, "-" or "_"')
      .optional(),
    cwd: z.string().min(1).optional(),
    env: z.record(z.string(), z.string()).optional(),
    launchEnv: z
      .record(z.string(), z.string())
      .refine((e) => !('KERNEL_LAUNCH_TIMEOUT' in e), {
        message: 'must not set KERNEL_LAUNCH_TIMEOUT: it follows startupTimeoutMs',
      })
      .refine((e) => !('KERNEL_ID' in e), { message: "must not set KERNEL_ID: each create sends its own kernel's id" })
      .optional(),
    prelude: z.string().optional(),
    environmentStep: z.enum(['wait', 'ahead']).optional(),
    signal: z.instanceof(AbortSignal).optional(),
    startupTimeoutMs: ms.optional(),
    protocol: z.enum(['auto', 'v1', 'legacy']).optional(),
    maxFrameBytes: z.number().int().positive().optional(),
    stallWorkaround: z.boolean().optional(),
    outputCaps: policy({
      maxStreamChars: z.number().int().min(0),
      maxOutputs: z.number().int().min(0),
      maxOutputBytes: z.number().int().min(0),
    }),
    reconnect: policy({ attempts: z.number().int().min(0), initialDelayMs: ms, maxDelayMs: ms, attemptTimeoutMs: ms }),
    livenessPollMs: ms.optional(),
    livenessTimeoutMs: ms.optional(),
    heartbeatMs: ms.optional(),
    kernelInfoRetryMs: z.number().finite().positive().optional(),
    iopubNudgeMs: z.number().finite().positive().optional(),
    iopubNudges: z.number().int().min(0).optional(),
    createAttempts: z.number().int().min(1).optional(),
    createRetryDelayMs: ms.optional(),
    interruptDrainMs: ms.optional(),
    idleGraceMs: ms.optional(),
    replyGraceMs: ms.optional(),
    resumeFromJournal: z.boolean().optional(),
    stopOnError: z.boolean().optional(),
    restartTimeoutMs: ms.optional(),
    recovery: policy({
      timeoutMs: ms,
      attemptTimeoutMs: z.number().finite().positive(),
      maxAttemptTimeoutMs: z.number().finite().positive(),
    }),
    shutdownTimeoutMs: ms.optional(),
    cleanupTimeoutMs: ms.optional(),
    abandonedCreateWaitMs: ms.optional(),
    cleanupRetry: policy({ attempts: z.number().int().min(1), initialDelayMs: ms, maxDelayMs: ms }),
    clock: z.custom<Clock>(isClock, 'must be a Clock with now() and setTimer()').optional(),
  });
});

/**
 * Validates `GatewayKernel.start()` options and applies their defaults (the `DEFAULT_*` constants); throws
 * `InvalidOptionsError` naming the bad field (`startupTimeoutMs`, `gateway.baseUrl`).
 *
 * `GatewayKernel.start()` calls it; call it yourself to check options from configuration before use.
 */
export function resolveGatewayKernelOptions(options: GatewayKernelStartOptions): ResolvedGatewayKernelOptions {
  const o = parseOptions(startSchema(), options, 'GatewayKernel.start options');
  const client = o.gateway instanceof GatewayClient ? o.gateway : gatewayFrom(o.gateway);
  if (o.launchEnv !== undefined) checkCreateEnv(o.launchEnv, 'GatewayKernel.start options launchEnv');
  return Object.freeze({
    client,
    kernelName: o.kernelName ?? DEFAULT_KERNEL_NAME,
    cwd: o.cwd,
    env: o.env,
    launchEnv: o.launchEnv,
    prelude: o.prelude,
    environmentStep: o.environmentStep ?? DEFAULT_ENVIRONMENT_STEP,
    signal: o.signal,
    startupTimeoutMs:
      o.startupTimeoutMs ??
      (client.flavor === 'enterprise-gateway' ? DEFAULT_REMOTE_STARTUP_TIMEOUT_MS : DEFAULT_STARTUP_TIMEOUT_MS),
    protocol: o.protocol ?? DEFAULT_PROTOCOL,
    maxFrameBytes: o.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES,
    stallWorkaround: o.stallWorkaround ?? DEFAULT_STALL_WORKAROUND,
    outputCaps: { ...DEFAULT_OUTPUT_CAPS, ...o.outputCaps },
    reconnect: { ...DEFAULT_RECONNECT, ...o.reconnect },
    livenessPollMs: o.livenessPollMs ?? DEFAULT_LIVENESS_POLL_MS,
    livenessTimeoutMs: o.livenessTimeoutMs ?? DEFAULT_LIVENESS_TIMEOUT_MS,
    heartbeatMs: o.heartbeatMs ?? DEFAULT_HEARTBEAT_MS,
    kernelInfoRetryMs: o.kernelInfoRetryMs ?? DEFAULT_KERNEL_INFO_RETRY_MS,
    iopubNudgeMs: o.iopubNudgeMs ?? DEFAULT_IOPUB_NUDGE_MS,
    iopubNudges: o.iopubNudges ?? DEFAULT_IOPUB_NUDGES,
    interruptDrainMs: o.interruptDrainMs ?? DEFAULT_INTERRUPT_DRAIN_MS,
    idleGraceMs: o.idleGraceMs ?? DEFAULT_IDLE_GRACE_MS,
    replyGraceMs: o.replyGraceMs ?? DEFAULT_REPLY_GRACE_MS,
    resumeFromJournal: o.resumeFromJournal ?? DEFAULT_RESUME_FROM_JOURNAL,
    stopOnError: o.stopOnError ?? DEFAULT_STOP_ON_ERROR,
    createAttempts: o.createAttempts ?? DEFAULT_CREATE_ATTEMPTS,
    createRetryDelayMs: o.createRetryDelayMs ?? DEFAULT_CREATE_RETRY_DELAY_MS,
    restartTimeoutMs: o.restartTimeoutMs ?? DEFAULT_RESTART_TIMEOUT_MS,
    recovery: { ...DEFAULT_RECOVERY, ...o.recovery },
    shutdownTimeoutMs: o.shutdownTimeoutMs ?? DEFAULT_SHUTDOWN_TIMEOUT_MS,
    cleanupTimeoutMs: o.cleanupTimeoutMs ?? DEFAULT_CLEANUP_TIMEOUT_MS,
    abandonedCreateWaitMs: o.abandonedCreateWaitMs ?? DEFAULT_ABANDONED_CREATE_WAIT_MS,
    cleanupRetry: { ...DEFAULT_CLEANUP_RETRY, ...o.cleanupRetry },
    clock: o.clock ?? systemClock,
  });
}

function gatewayFrom(options: GatewayClientOptions | GatewaySetLike): GatewayClient {
  try {
    return new GatewayClient(options);
  } catch (error) {
    if (!InvalidOptionsError.isInstance(error)) throw error;
    const issues = error.issues.map((i) => ({ path: i.path ? `gateway.${i.path}` : 'gateway', message: i.message }));
    throw new InvalidOptionsError(issues, { subject: 'GatewayKernel.start options', cause: error });
  }
}
