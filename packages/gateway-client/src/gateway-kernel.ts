import { randomUUID } from 'node:crypto';
import {
  type AbortScope,
  abortScope,
  type Clock,
  DeadlineExceededError,
  type ExecuteOptions,
  type ExecuteResult,
  InvalidOptionsError,
  isClock,
  type KernelHandle,
  systemClock,
  type Timer,
} from '@kernelwarden/core';
import { createMessage, type JupyterMessage } from '@kernelwarden/jupyter-protocol';
import { z } from 'zod';
import { KernelChannel, type ReconnectPolicy, type WireProtocol } from './channel.js';
import { type KernelDeathReason, KernelDiedError, KernelStartError } from './errors.js';
import { CellExecution, DEFAULT_OUTPUT_CAPS, DEFAULT_REPLY_GRACE_MS, type OutputCaps } from './execution.js';
import { GatewayClient, type GatewayClientOptions, type KernelModel } from './gateway-client.js';
import {
  type GatewayKernelEventMap,
  type GatewayKernelListener,
  KernelEvents,
  type KernelStatus,
} from './kernel-events.js';
import { MessageSequence } from './message-sequence.js';
import {
  type CleanupRetryPolicy,
  DEFAULT_CLEANUP_RETRY,
  DEFAULT_CLEANUP_TIMEOUT_MS,
  deleteUntilConfirmed,
} from './start-cleanup.js';
import { type StartWatch, watchKernelStart } from './start-watch.js';
import { parseOptions } from './validation.js';

/** Options of `GatewayKernel.start()`. */
export interface GatewayKernelStartOptions {
  /** A `GatewayClient`, or the options to build one (`{ baseUrl, token?, ownership?, fetch?, WebSocket? }`). */
  gateway: GatewayClient | GatewayClientOptions;
  /** The kernelspec to launch. @defaultValue 'python3' */
  kernelName?: string;
  /** Working directory the kernel switches to before the prelude (Python and R kernels). */
  cwd?: string;
  /** Environment variables set in the kernel before the prelude (Python and R kernels). */
  env?: Record<string, string>;
  /** Code run (silently) once the kernel is ready; a failing prelude fails the start. */
  prelude?: string;
  /**
   * Aborts the start: it rejects at once with the signal's reason, and the kernel (if created) is deleted in the
   * background, retried as `cleanupRetry` says until the gateway confirms it.
   */
  signal?: AbortSignal;
  /** One deadline for create, connect, handshake, environment and prelude; `0` disables it. @defaultValue 60000 */
  startupTimeoutMs?: number;
  /** Wire format: `'auto'` negotiates v1 and falls back to legacy. @defaultValue 'auto' */
  protocol?: WireProtocol;
  /**
   * Send an unsolicited WebSocket pong after each received message while a request is pending (only with the
   * `ws` library): removes the ~40 ms Nagle / delayed-ACK stall of stock jupyter-server. @defaultValue true
   */
  stallWorkaround?: boolean;
  /** How much output a result keeps. @defaultValue `{ maxStreamChars: 1048576, maxOutputs: 1000 }` */
  outputCaps?: Partial<OutputCaps>;
  /** Reopening a dropped channels socket. @defaultValue `{ attempts: 6, initialDelayMs: 100, maxDelayMs: 3000 }` */
  reconnect?: Partial<ReconnectPolicy>;
  /**
   * While executions are pending and the socket has been quiet this long, ask the REST API whether the kernel
   * still exists (a vanished kernel fails them with `KernelDiedError`). `0` disables polling. @defaultValue 2000
   */
  livenessPollMs?: number;
  /**
   * With the `ws` library: while executions are pending, a socket silent this long is pinged, and one that then
   * stays silent as long again is taken for hung and reopened (its cells keep waiting for the replayed output).
   * Checked on the liveness poll's ticks (so `livenessPollMs: 0` turns it off too); `0` disables it.
   * @defaultValue 15000
   */
  heartbeatMs?: number;
  /**
   * Interval between `kernel_info_request` retries until the first reply. The handshake also waits for the
   * request's `status` on iopub (re-sending every 250 ms, six times at most), so that iopub is known to be
   * subscribed before the first cell runs. @defaultValue 1000
   */
  kernelInfoRetryMs?: number;
  /**
   * After a cancelled cell is interrupted, later requests wait this long at most for its reply, so the kernel's
   * `stop_on_error` does not abort them. @defaultValue 3000
   */
  interruptDrainMs?: number;
  /**
   * After a cell's `execute_reply`, how long the socket may stay silent before the cell completes without its
   * `status: idle`, with `outputDropped: true`: a server that fell behind a chatty kernel can lose the idle with
   * the output before it (ZMQ drops iopub past its high-water mark), and the cell would otherwise never complete.
   * Any message arriving restarts the wait. `0` waits for the idle for ever. @defaultValue 5000
   */
  idleGraceMs?: number;
  /**
   * After the kernel's `status: idle` for a cell whose `execute_reply` has not come, how long to wait for it before
   * the cell completes with status `'error'` and `error.ename` `'KernelProtocolError'` (ipykernel goes idle without a
   * reply when its handler fails, e.g. on code with a NUL character; the cell would otherwise wait for its timeout).
   * The wait restarts while messages keep arriving. `0` waits for the reply for ever. @defaultValue 3000
   */
  replyGraceMs?: number;
  /**
   * Sent as `stop_on_error` with every cell: when true, ipykernel aborts the requests already queued behind a cell
   * that raised — including one sent right after the error, in a race. Off, each cell stands alone.
   * @defaultValue false
   */
  stopOnError?: boolean;
  /** Attempts at `POST /api/kernels` while it answers 5xx. @defaultValue 3 */
  createAttempts?: number;
  /**
   * Bound on each DELETE that cleans up after a failed start; `0` disables it. A start that failed on its own (not
   * aborted) waits for the first DELETE, so the kernel is normally gone when it rejects. @defaultValue 2000
   */
  cleanupTimeoutMs?: number;
  /**
   * Retries of the cleanup DELETE while the gateway does not confirm it (an error, a hang past `cleanupTimeoutMs`):
   * `attempts` DELETEs in all, waiting `initialDelayMs` before the second and doubling up to `maxDelayMs`, on
   * `clock`, in the background. If every attempt fails, or the process exits first, the kernel stays recorded with
   * the gateway's ownership (`LocalGateway` leases) and its orphan sweep deletes it on the next acquire.
   * @defaultValue `{ attempts: 6, initialDelayMs: 250, maxDelayMs: 4000 }`
   */
  cleanupRetry?: Partial<CleanupRetryPolicy>;
  /** The clock for every timer of this kernel. @defaultValue systemClock */
  clock?: Clock;
}

const positive = z.number().min(0);
const startSchema = z.object({
  gateway: z.custom<GatewayClient | GatewayClientOptions>(
    (v) => typeof v === 'object' && v !== null,
    'must be a GatewayClient or { baseUrl, token? }',
  ),
  kernelName: z.string().min(1).optional(),
  cwd: z.string().min(1).optional(),
  env: z.record(z.string(), z.string()).optional(),
  prelude: z.string().optional(),
  signal: z.instanceof(AbortSignal).optional(),
  startupTimeoutMs: positive.optional(),
  protocol: z.enum(['auto', 'v1', 'legacy']).optional(),
  stallWorkaround: z.boolean().optional(),
  outputCaps: z
    .object({ maxStreamChars: z.number().int().min(0), maxOutputs: z.number().int().min(0) })
    .partial()
    .optional(),
  reconnect: z
    .object({ attempts: z.number().int().min(0), initialDelayMs: positive, maxDelayMs: positive })
    .partial()
    .optional(),
  livenessPollMs: positive.optional(),
  heartbeatMs: positive.optional(),
  kernelInfoRetryMs: z.number().positive().optional(),
  createAttempts: z.number().int().min(1).optional(),
  interruptDrainMs: positive.optional(),
  idleGraceMs: positive.optional(),
  replyGraceMs: positive.optional(),
  stopOnError: z.boolean().optional(),
  cleanupTimeoutMs: positive.optional(),
  cleanupRetry: z
    .object({ attempts: z.number().int().min(1), initialDelayMs: positive, maxDelayMs: positive })
    .partial()
    .optional(),
  clock: z.custom<Clock>(isClock, 'must be a Clock with now() and setTimer()').optional(),
});

type ParsedStart = z.output<typeof startSchema>;

/** What the kernel said about itself in its `kernel_info_reply`. */
export interface KernelInfo {
  /** `language_info.name`, e.g. `'python'` or `'R'`. */
  language: string;
  /** The whole reply content. */
  content: Record<string, unknown>;
}

interface KernelInfoWaiter {
  ids: Set<string>;
  /** A `kernel_info_reply` to one of `ids` arrived. */
  done(content: Record<string, unknown>): void;
  /** An iopub message whose parent is one of `ids` arrived: this socket's iopub subscription is live. */
  iopub(): void;
  fail(error: unknown): void;
}

/** Messages of a cell acknowledged by the stall workaround before it treats the cell as a flood (`#pongMode`). */
const PONG_MESSAGES = 64;

/** After the reply, how many more `kernel_info_request`s the handshake sends while waiting for iopub. */
const IOPUB_NUDGES = 6;
/** Their interval (jupyter_server nudges every 500 ms). */
const IOPUB_NUDGE_MS = 250;

/**
 * A kernel running on a Jupyter Server or Kernel Gateway, driven over REST and the channels WebSocket.
 *
 * Start one with `GatewayKernel.start()`; it implements `KernelHandle` (execute, interrupt, kill, restart,
 * shutdown), reports `status` and emits events (`on('status', …)`), and shuts down on `await using`.
 */
export class GatewayKernel implements KernelHandle, AsyncDisposable {
  /** The gateway's kernel id. */
  readonly id: string;
  /** The session id of the channels socket (kept across reconnects so the server replays buffered output). */
  readonly sessionId: string;
  /** The REST client this kernel uses. */
  readonly client: GatewayClient;
  /** The kernelspec name. */
  readonly kernelName: string;
  #channel: KernelChannel;
  #events = new KernelEvents();
  #status: KernelStatus = 'starting';
  #alive = true;
  #pending = new Map<string, CellExecution>();
  #kernelInfo: KernelInfo | undefined;
  #infoWaiter: KernelInfoWaiter | undefined;
  #caps: OutputCaps;
  #clock: Clock;
  #opts: ParsedStart;
  #ownRestart = false;
  /** A `kill()` just gave the kernel a fresh interpreter and nothing has run on it since. */
  #freshFromKill = false;
  #recovering: Promise<void> | undefined;
  #pollTimer: Timer | undefined;
  #pollSeen = -1;
  #shutdownConfirmed = false;
  #shutdownInFlight: Promise<{ confirmed: boolean }> | undefined;
  /** Cells we stopped waiting for but interrupted: new requests wait for their reply (see `#cancel`). */
  #orphans = new Map<string, { replied: boolean; idle: boolean; done(): void }>();
  #gate: Promise<void> | undefined;
  #sequence = new MessageSequence();
  /** Set from create until the first handshake completes: a death then fails the start at once. */
  #startWatch: StartWatch | undefined;

  private constructor(client: GatewayClient, model: KernelModel, opts: ParsedStart) {
    this.id = model.id;
    this.kernelName = model.name;
    this.client = client;
    this.sessionId = randomUUID();
    this.#opts = opts;
    this.#clock = opts.clock ?? systemClock;
    this.#caps = { ...DEFAULT_OUTPUT_CAPS, ...opts.outputCaps };
    const target = client.channelsTarget(model.id, this.sessionId);
    this.#channel = new KernelChannel({
      WebSocket: client.WebSocket,
      url: target.url,
      sessionId: this.sessionId,
      headers: target.headers,
      where: `kernel ${model.id} at ${client.baseUrl}`,
      protocol: opts.protocol ?? 'auto',
      stallWorkaround: opts.stallWorkaround ?? true,
      reconnect: { attempts: 6, initialDelayMs: 100, maxDelayMs: 3000, ...opts.reconnect },
      clock: this.#clock,
      pongMode: () => this.#pongMode(),
      onMessage: (msg) => this.#onMessage(msg),
      onProtocolError: (error) => this.#events.emit('protocol-error', { error }),
      onReconnecting: (attempt, delayMs) => {
        if (attempt === 1) for (const execution of this.#pending.values()) execution.crossedReconnect = true;
        this.#events.emit('reconnecting', { attempt, delayMs });
        if (attempt === 1) void this.#checkGone();
      },
      onReconnected: () => this.#events.emit('reconnected', {}),
      onLost: (error) => {
        this.#events.emit('connection-lost', { error });
        void this.#lost(error);
      },
    });
  }

  /**
   * Creates a kernel, connects its channels, waits for its `kernel_info_reply`, applies `cwd`/`env`, runs the
   * prelude, and resolves with the ready kernel.
   *
   * One deadline (`startupTimeoutMs`) and the caller's signal cover every step. Any failure after the kernel
   * exists closes the socket and sends the kernel's DELETE before the promise settles; a start that failed on its own
   * also waits for that first DELETE (up to `cleanupTimeoutMs`), an aborted one rejects at once with the signal's
   * reason. An unconfirmed DELETE is retried in the background (`cleanupRetry`). A step that runs out of time
   * rejects with `name: 'TimeoutError'` and `Failed to initialize kernel environment` / `… prelude`; a create that
   * never succeeds rejects with `KernelStartError` (`Failed to create kernel …`, with `status`). A kernel that dies
   * before it first answers (its process exits, the server reports it dead or drops it) rejects within seconds with
   * `KernelStartError` (`… died while starting: …`), carrying the kernel's last stderr lines when the gateway is a
   * `LocalGateway` lease (see `start-watch.ts`).
   */
  static async start(options: GatewayKernelStartOptions): Promise<GatewayKernel> {
    const opts = parseOptions(startSchema, options, 'GatewayKernel.start options');
    const client = opts.gateway instanceof GatewayClient ? opts.gateway : gatewayFrom(opts.gateway);
    const clock = opts.clock ?? systemClock;
    const startupTimeoutMs = opts.startupTimeoutMs ?? 60_000;
    const scope = abortScope({
      signal: opts.signal,
      timeoutMs: startupTimeoutMs,
      clock,
      timeoutMessage: `Kernel start on ${client.baseUrl} timed out after ${startupTimeoutMs} ms`,
    });
    let kernel: GatewayKernel | undefined;
    try {
      scope.throwIfAborted();
      const model = await createKernel(client, opts, scope, clock);
      kernel = new GatewayKernel(client, model, opts);
      const opened = kernel;
      const watch = watchKernelStart({ client, kernelId: model.id, kernelName: model.name, clock });
      kernel.#startWatch = watch;
      try {
        const usable = (async () => {
          await opened.#channel.open(scope.signal);
          await opened.#handshake(scope.signal);
        })();
        await scope.race(Promise.race([usable, watch.failed]));
      } finally {
        watch.stop();
        kernel.#startWatch = undefined;
      }
      if (opts.cwd !== undefined || opts.env !== undefined) {
        await kernel.#step(kernel.#environmentCode(opts.cwd, opts.env), 'environment', scope);
      }
      if (opts.prelude) await kernel.#step(opts.prelude, 'prelude', scope);
      if (kernel.#status === 'starting' || kernel.#status === 'busy') kernel.#setStatus('idle');
      return kernel;
    } catch (error) {
      if (kernel) {
        const doomed = kernel;
        // shutdown() closes the socket and settles everything pending at once, then DELETEs the kernel.
        const cleanup = startCleanup(
          opts,
          clock,
          async (signal) => (await doomed.shutdown({ timeoutMs: 0, signal })).confirmed,
        );
        // A caller who gave up gets its reason at once; a start that failed on its own waits for the first DELETE.
        if (!opts.signal?.aborted) await cleanup.first;
      }
      throw error;
    } finally {
      scope.dispose();
    }
  }

  /** The kernel's current state. */
  get status(): KernelStatus {
    return this.#status;
  }

  /** The kernel's `kernel_info_reply` (language and versions), once the start handshake completed. */
  get info(): KernelInfo | undefined {
    return this.#kernelInfo;
  }

  /** The negotiated wire format of the channels socket. */
  get protocol(): 'v1' | 'legacy' {
    return this.#channel.format;
  }

  /** Subscribes to an event (`status`, `output-dropped`, `protocol-error`, `reconnecting`, …); returns an unsubscribe function. */
  on<K extends keyof GatewayKernelEventMap>(type: K, listener: GatewayKernelListener<K>): () => void {
    return this.#events.on(type, listener);
  }

  /** Unsubscribes a listener added with `on()`. */
  off<K extends keyof GatewayKernelEventMap>(type: K, listener: GatewayKernelListener<K>): void {
    this.#events.off(type, listener);
  }

  /** False once the kernel was shut down, died for good, or lost its connection for good. */
  isAlive(): boolean {
    return this.#alive;
  }

  /**
   * Runs one cell. Resolves when both its `execute_reply` and its `status: idle` arrived, with stdout/stderr apart,
   * every output in order (also streamed to `onOutput`), the error if it raised, and `cellId`.
   *
   * Aborting `signal` or running out of `timeoutMs` interrupts the kernel (when this cell is the one running) and
   * resolves at once with `cancelled` (and `timedOut`). Rejects with `KernelDiedError` when the kernel dies or
   * vanishes, and when the kernel is not alive.
   */
  execute(code: string, opts: ExecuteOptions = {}): Promise<ExecuteResult> {
    this.#freshFromKill = false;
    return this.#execute(code, opts, true);
  }

  #execute(code: string, opts: ExecuteOptions, interruptOnCancel: boolean): Promise<ExecuteResult> {
    if (!this.#alive) return Promise.reject(this.#notAlive());
    const cellId = opts.cellId ?? randomUUID();
    const msg = createMessage(
      'shell',
      'execute_request',
      this.sessionId,
      {
        code,
        silent: opts.silent ?? false,
        store_history: opts.storeHistory ?? !(opts.silent ?? false),
        user_expressions: {},
        allow_stdin: opts.onInput !== undefined,
        stop_on_error: this.#opts.stopOnError ?? false,
      },
      { metadata: { cellId } },
    );
    const msgId = msg.header.msg_id;
    let execution!: CellExecution;
    const promise = new Promise<ExecuteResult>((resolve, reject) => {
      execution = new CellExecution(msgId, cellId, opts, this.#caps, resolve, reject, () =>
        this.#events.emit('output-dropped', opts.origin === undefined ? { cellId } : { cellId, origin: opts.origin }),
      );
    });
    if (opts.signal?.aborted) {
      execution.complete({ status: 'aborted', cancelled: true });
      return promise;
    }
    if (opts.signal || (opts.timeoutMs !== undefined && opts.timeoutMs > 0)) {
      const s = abortScope({ signal: opts.signal, timeoutMs: opts.timeoutMs, clock: this.#clock });
      const onAbort = () => this.#cancel(execution, s.timedOut, interruptOnCancel);
      s.signal.addEventListener('abort', onAbort, { once: true });
      execution.onSettled = () => {
        s.signal.removeEventListener('abort', onAbort);
        s.dispose();
        this.#pending.delete(msgId);
      };
    } else {
      execution.onSettled = () => this.#pending.delete(msgId);
    }
    execution.sequenceMark = this.#sequence.mark();
    this.#pending.set(msgId, execution);
    this.#schedulePoll();
    const gate = this.#gate;
    if (gate) {
      void gate.then(() => {
        if (!execution.settled && this.#alive) this.#channel.send(msg);
      });
    } else {
      this.#channel.send(msg);
    }
    return promise;
  }

  /**
   * Asks the gateway to interrupt the kernel (`POST …/interrupt`); `delivered` says whether the gateway accepted.
   * Never throws, except with the signal's reason when `signal` aborts.
   */
  async interrupt(opts: { signal?: AbortSignal } = {}): Promise<{ delivered: boolean }> {
    if (!this.#alive) return { delivered: false };
    try {
      await this.client.interruptKernel(this.id, { signal: opts.signal });
      return { delivered: true };
    } catch {
      if (opts.signal?.aborted) throw opts.signal.reason;
      return { delivered: false };
    }
  }

  /**
   * Hard stop of the interpreter: the gateway's restart, which kills a kernel that ignores the shutdown request
   * and starts a fresh one under the same id (the handle stays usable, with fresh state).
   */
  async kill(opts: { signal?: AbortSignal } = {}): Promise<void> {
    await this.#restart(opts);
    this.#freshFromKill = this.#alive;
  }

  /**
   * Fresh interpreter state on the same handle (`POST …/restart`), then the channels are reopened. Status goes
   * `restarting` → `idle`; executions in flight resolve with `status: 'aborted'`. Right after a `kill()` (which
   * already gave the kernel a fresh interpreter) with nothing run since, it does nothing: the watchdog's
   * kill-then-restart ladder costs one kernel start, not two.
   */
  async restart(opts: { signal?: AbortSignal } = {}): Promise<void> {
    if (!this.#alive) throw this.#notAlive();
    if (this.#freshFromKill) {
      this.#freshFromKill = false;
      opts.signal?.throwIfAborted();
      return;
    }
    await this.#restart(opts);
  }

  async #restart(opts: { signal?: AbortSignal }): Promise<void> {
    if (!this.#alive) throw this.#notAlive();
    this.#freshFromKill = false;
    this.#ownRestart = true;
    this.#setStatus('restarting');
    for (const execution of [...this.#pending.values()]) execution.complete({ status: 'aborted' });
    this.#releaseOrphans();
    const work = (async () => {
      await this.client.restartKernel(this.id, { signal: opts.signal, timeoutMs: 120_000 });
      await this.#channel.reopen(opts.signal);
      await this.#handshake(opts.signal);
    })();
    this.#holdSendsUntil(work);
    try {
      await work;
      if (this.#alive) this.#setStatus('idle');
    } finally {
      this.#ownRestart = false;
    }
  }

  /**
   * Holds new requests until `work` settles. After a restart the new socket's iopub subscription is confirmed only
   * by the handshake (see `#handshake`): a cell sent earlier could run before iopub is connected and lose its
   * `status: idle` (the cell would never complete).
   */
  #holdSendsUntil(work: Promise<unknown>): void {
    const gate: Promise<void> = Promise.all([this.#gate, work.catch(() => {})]).then(() => {
      if (this.#gate === gate) this.#gate = undefined;
    });
    this.#gate = gate;
  }

  /**
   * Stops the kernel for good: closes the socket, resolves pending executions as cancelled, then `DELETE`s it.
   * A 2xx, 404 or 410 is `{ confirmed: true }`; an error, a thrown fetch or the timeout is `{ confirmed: false }`.
   * Never throws. An unconfirmed shutdown may be retried (another DELETE); once confirmed, nothing is sent again.
   */
  shutdown(opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<{ confirmed: boolean }> {
    if (this.#shutdownConfirmed) return Promise.resolve({ confirmed: true });
    if (this.#shutdownInFlight) return this.#shutdownInFlight;
    this.#alive = false;
    this.#stopPoll();
    this.#channel.close();
    this.#infoWaiter?.fail(
      new KernelDiedError(`Kernel ${this.id} at ${this.client.baseUrl} was shut down`, {
        reason: 'shutdown',
        kernelId: this.id,
      }),
    );
    for (const execution of [...this.#pending.values()]) execution.complete({ status: 'aborted', cancelled: true });
    this.#releaseOrphans();
    if (this.#status !== 'dead') this.#setStatus('closed');
    const attempt = (async () => {
      try {
        await this.client.deleteKernel(this.id, { timeoutMs: opts.timeoutMs ?? 5000, signal: opts.signal });
        this.#shutdownConfirmed = true;
        return { confirmed: true };
      } catch {
        return { confirmed: false };
      } finally {
        this.#shutdownInFlight = undefined;
      }
    })();
    this.#shutdownInFlight = attempt;
    return attempt;
  }

  /** Shuts the kernel down (for `await using`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.shutdown();
  }

  #notAlive(): KernelDiedError {
    const why =
      this.#shutdownInFlight || this.#shutdownConfirmed || this.#status === 'closed' ? 'was shut down' : 'died';
    return new KernelDiedError(`Kernel ${this.id} at ${this.client.baseUrl} ${why}; start a new one`, {
      reason: why === 'died' ? 'dead' : 'shutdown',
      kernelId: this.id,
    });
  }

  #setStatus(status: KernelStatus): void {
    const previous = this.#status;
    if (previous === status) return;
    this.#status = status;
    this.#events.emit('status', { status, previous });
  }

  #onMessage(msg: JupyterMessage): void {
    const parentId = msg.parent_header.msg_id;
    const type = msg.header.msg_type;
    if (msg.header.session !== this.sessionId && typeof msg.header.msg_id === 'string') {
      this.#sequence.observe(msg.header.msg_id);
    }
    switch (msg.channel) {
      case 'iopub': {
        const waiter = this.#infoWaiter;
        if (waiter && parentId !== undefined && waiter.ids.has(parentId)) waiter.iopub();
        if (type === 'status') {
          const state = msg.content.execution_state;
          if (state === 'restarting' || state === 'dead') {
            this.#kernelRestarted(state);
            return;
          }
          // Only this handle's cells move the status: the handshake's and the server's own kernel_info requests
          // (and other clients' cells) make the kernel flap busy/idle too.
          if (
            (state === 'busy' || state === 'idle') &&
            parentId !== undefined &&
            (this.#pending.has(parentId) || this.#orphans.has(parentId)) &&
            this.#status !== 'restarting' &&
            this.#alive
          ) {
            this.#setStatus(state);
          }
        }
        const execution = parentId === undefined ? undefined : this.#pending.get(parentId);
        if (execution) {
          if (execution.iopub(msg)) this.#completed(execution);
          else if (type === 'status' && execution.idle && !execution.replied) this.#awaitReply(execution);
        } else if (parentId !== undefined && this.#orphans.size > 0 && msg.content.execution_state === 'idle') {
          this.#orphanMessage(parentId, 'idle');
        }
        return;
      }
      case 'shell': {
        if (type === 'kernel_info_reply') {
          const waiter = this.#infoWaiter;
          if (waiter && parentId !== undefined && waiter.ids.has(parentId)) waiter.done(msg.content);
          return;
        }
        if (type !== 'execute_reply' || parentId === undefined) return;
        const execution = this.#pending.get(parentId);
        if (execution) {
          if (execution.reply(msg)) this.#completed(execution);
          else this.#awaitIdle(execution);
        } else if (this.#orphans.size > 0) {
          this.#orphanMessage(parentId, 'reply');
        }
        return;
      }
      case 'stdin': {
        const execution = parentId === undefined ? undefined : this.#pending.get(parentId);
        if (execution && type === 'input_request') void this.#answerInput(execution, msg);
        return;
      }
      default:
        return;
    }
  }

  async #answerInput(execution: CellExecution, msg: JupyterMessage): Promise<void> {
    execution.stdinRequested = true;
    const onInput = execution.opts.onInput;
    let value = '';
    if (onInput) {
      try {
        value = await onInput({ prompt: String(msg.content.prompt ?? ''), password: msg.content.password === true });
      } catch {
        value = '';
      }
    }
    if (execution.settled || !this.#alive) return;
    this.#channel.send(createMessage('stdin', 'input_reply', this.sessionId, { value }, { parent: msg.header }));
  }

  /**
   * Settles a cell the caller stopped waiting for, and interrupts the kernel when that cell is the one running.
   * The interrupted cell's error makes ipykernel abort every request already queued behind it (`stop_on_error`),
   * so later requests are held until its reply arrives (at most `interruptDrainMs`).
   */
  #cancel(execution: CellExecution, timedOut: boolean, interrupt: boolean): void {
    if (execution.settled) return;
    const running = this.#pending.keys().next().value === execution.msgId;
    execution.complete({ status: 'aborted', cancelled: true, timedOut });
    if (!interrupt || !running || !this.#alive) return;
    const msgId = execution.msgId;
    let release!: () => void;
    const drained = new Promise<void>((resolve) => (release = resolve));
    const timer = this.#clock.setTimer(() => release(), this.#opts.interruptDrainMs ?? 3000);
    this.#orphans.set(msgId, { replied: execution.replied, idle: execution.idle, done: () => release() });
    const gate = Promise.all([this.#gate, drained]).then(() => {
      timer.cancel();
      this.#orphans.delete(msgId);
      if (this.#gate === gate) this.#gate = undefined;
    });
    this.#gate = gate;
    void this.interrupt().catch(() => {});
  }

  #releaseOrphans(): void {
    for (const orphan of this.#orphans.values()) orphan.done();
  }

  #orphanMessage(parentId: string, kind: 'reply' | 'idle'): void {
    const orphan = this.#orphans.get(parentId);
    if (!orphan) return;
    if (kind === 'reply') orphan.replied = true;
    else orphan.idle = true;
    if (orphan.replied && orphan.idle) orphan.done();
  }

  /**
   * A cell got its reply and its idle. If the socket dropped meanwhile and the kernel's message numbers show a
   * hole since the request, the server lost output around the drop (see `MessageSequence`): the result says so.
   */
  #completed(execution: CellExecution): void {
    if (
      execution.crossedReconnect &&
      execution.sequenceMark &&
      this.#sequence.missingSince(execution.sequenceMark) > 0
    ) {
      execution.markDropped();
    }
    execution.complete();
  }

  /**
   * How the stall workaround acknowledges the messages just read. At once during the handshake and for the first
   * `PONG_MESSAGES` messages of a pending cell (a short cell's every message). Past that the cell is a flood: no pong
   * until its reply has come, then one whenever the socket pauses. A pong per read in a flood gets the server to send
   * each next message at once, in a segment and a read of its own, answered by another pong — on a 2-core machine
   * that tripled the client's CPU on a flood of flushed lines. While a flood flows, the server's Nagle coalesces it
   * into full segments that TCP acknowledges at once anyway; a big cell pays at most one delayed ACK for its reply,
   * and the quiet pong after the reply releases the idle that Nagle holds behind it.
   */
  #pongMode(): 'now' | 'quiet' | false {
    if (this.#infoWaiter) return 'now';
    let mode: 'quiet' | false = false;
    for (const execution of this.#pending.values()) {
      if (execution.messages < PONG_MESSAGES) return 'now';
      if (execution.replied) mode = 'quiet';
    }
    return mode;
  }

  /**
   * The reply came first: waits for the idle while messages keep arriving, and completes the cell as
   * `outputDropped` once the socket has been silent for `idleGraceMs` (the server lost the idle; see the option).
   */
  #awaitIdle(execution: CellExecution): void {
    const graceMs = this.#opts.idleGraceMs ?? 5000;
    if (graceMs <= 0) return;
    let seen = this.#channel.received;
    let timer: Timer | undefined;
    const tick = () => {
      timer = undefined;
      if (execution.settled || !this.#alive) return;
      if (this.#channel.received !== seen || !this.#channel.isOpen || this.#recovering) {
        seen = this.#channel.received;
        timer = this.#clock.setTimer(tick, graceMs);
        return;
      }
      // A timer can fire before the socket's pending data is read (an event loop that was blocked runs timers
      // first): look again after the next poll phase.
      setImmediate(() => {
        if (execution.settled || !this.#alive) return;
        if (this.#channel.received !== seen) {
          seen = this.#channel.received;
          timer = this.#clock.setTimer(tick, graceMs);
          return;
        }
        execution.markDropped();
        this.#completed(execution);
        if (this.#pending.size === 0 && this.#status === 'busy') this.#setStatus('idle');
      });
    };
    timer = this.#clock.setTimer(tick, graceMs);
    const settled = execution.onSettled;
    execution.onSettled = () => {
      timer?.cancel();
      settled?.();
    };
  }

  /**
   * The idle came first: waits `replyGraceMs` for the reply (longer while messages keep arriving or the socket is
   * reopening), then settles the cell with the missing-reply error (see the option).
   */
  #awaitReply(execution: CellExecution): void {
    const graceMs = this.#opts.replyGraceMs ?? DEFAULT_REPLY_GRACE_MS;
    if (graceMs <= 0 || execution.awaitingReply) return;
    execution.awaitingReply = true;
    let seen = this.#channel.received;
    let timer: Timer | undefined;
    const tick = () => {
      timer = undefined;
      if (execution.settled || !this.#alive) return;
      if (this.#channel.received !== seen || !this.#channel.isOpen || this.#recovering) {
        seen = this.#channel.received;
        timer = this.#clock.setTimer(tick, graceMs);
        return;
      }
      // As in #awaitIdle: a reply already on the socket is read in the next poll phase; look again after it.
      setImmediate(() => {
        if (execution.settled || !this.#alive) return;
        if (this.#channel.received !== seen) {
          seen = this.#channel.received;
          timer = this.#clock.setTimer(tick, graceMs);
          return;
        }
        execution.completeWithoutReply(graceMs);
        if (this.#pending.size === 0 && this.#status === 'busy') this.#setStatus('idle');
      });
    };
    timer = this.#clock.setTimer(tick, graceMs);
    const settled = execution.onSettled;
    execution.onSettled = () => {
      timer?.cancel();
      settled?.();
    };
  }

  #kernelRestarted(state: 'restarting' | 'dead'): void {
    if (!this.#alive) return;
    if (this.#startWatch) {
      this.#startWatch.statusSeen(state);
      return;
    }
    this.#freshFromKill = false;
    if (state === 'dead') {
      this.#die('dead', `Kernel ${this.id} at ${this.client.baseUrl} died and the server could not restart it`);
      return;
    }
    this.#setStatus('restarting');
    if (this.#ownRestart) return;
    const lost = new KernelDiedError(
      `Kernel ${this.id} at ${this.client.baseUrl} died while the cell ran; the server restarted it, so its variables are gone and the cell's remaining output is lost`,
      { reason: 'restarted', kernelId: this.id },
    );
    for (const execution of [...this.#pending.values()]) execution.fail(lost);
    this.#releaseOrphans();
    if (!this.#recovering) {
      this.#recovering = this.#recover().finally(() => {
        this.#recovering = undefined;
      });
      this.#holdSendsUntil(this.#recovering);
    }
  }

  /** After a server-side auto-restart: reopen the channels (the new process may use new ports) and handshake. */
  async #recover(): Promise<void> {
    const scope = abortScope({ timeoutMs: 120_000, clock: this.#clock });
    try {
      // The server restarts a crashed kernel asynchronously: a socket opened while it does may never see a reply.
      // Each attempt gets a bounded handshake; a silent one reopens the socket rather than waiting out the deadline.
      for (let attempt = 1; ; attempt++) {
        const step = abortScope({
          signal: scope.signal,
          timeoutMs: Math.min(15_000, 5000 * attempt),
          clock: this.#clock,
        });
        try {
          await this.#channel.reopen(step.signal);
          await this.#handshake(step.signal);
          break;
        } catch (error) {
          if (!step.timedOut || !this.#alive) throw error;
        } finally {
          step.dispose();
        }
      }
      if (this.#alive) this.#setStatus('idle');
    } catch (error) {
      if (!(await this.#checkGone()) && this.#alive) {
        this.#die(
          'dead',
          `Kernel ${this.id} at ${this.client.baseUrl} did not come back after the server restarted it`,
          error,
        );
      }
    } finally {
      scope.dispose();
    }
  }

  #die(reason: KernelDeathReason, message: string, cause?: unknown): void {
    if (!this.#alive) return;
    this.#alive = false;
    this.#stopPoll();
    this.#channel.close();
    this.#setStatus('dead');
    const error = new KernelDiedError(message, { reason, kernelId: this.id, cause });
    this.#infoWaiter?.fail(error);
    for (const execution of [...this.#pending.values()]) execution.fail(error);
    this.#releaseOrphans();
  }

  async #lost(error: Error): Promise<void> {
    if (await this.#checkGone()) return;
    this.#die(
      'connection-lost',
      `Lost the connection to kernel ${this.id} at ${this.client.baseUrl} for good; the output of running cells is lost`,
      error,
    );
  }

  /** Asks REST whether the kernel still exists; fails everything and returns true when it does not. */
  async #checkGone(): Promise<boolean> {
    if (!this.#alive) return true;
    let model: KernelModel | undefined;
    try {
      model = await this.client.getKernel(this.id, { timeoutMs: 5000 });
    } catch {
      return false;
    }
    if (model && model.execution_state !== 'dead') return false;
    this.#die(
      model ? 'dead' : 'gone',
      model
        ? `Kernel ${this.id} at ${this.client.baseUrl} is dead`
        : `Kernel ${this.id} vanished from the gateway at ${this.client.baseUrl} (it was shut down or culled elsewhere)`,
    );
    return true;
  }

  #schedulePoll(): void {
    const every = this.#opts.livenessPollMs ?? 2000;
    if (this.#pollTimer || every <= 0) return;
    this.#pollSeen = this.#channel.received;
    this.#pollTimer = this.#clock.setTimer(() => void this.#pollTick(), every);
  }

  async #pollTick(): Promise<void> {
    this.#pollTimer = undefined;
    if (!this.#alive || this.#pending.size === 0) return;
    this.#channel.checkHeartbeat(this.#opts.heartbeatMs ?? 15_000);
    const quiet = this.#channel.received === this.#pollSeen;
    if (quiet && !this.#channel.isReconnecting && !this.#recovering && (await this.#checkGone())) return;
    if (this.#alive && this.#pending.size > 0) this.#schedulePoll();
  }

  #stopPoll(): void {
    this.#pollTimer?.cancel();
    this.#pollTimer = undefined;
  }

  /**
   * Sends `kernel_info_request` (again every `kernelInfoRetryMs`) until the first reply, then until iopub carries a
   * message of one of them, like jupyter_server's own nudge. A socket opened on a freshly (re)started kernel may
   * receive its shell reply before its iopub subscription reaches the kernel (ZMQ's slow joiner): a cell sent then
   * would lose its `status: idle` and never complete. jupyter_server 1.23 skips its nudge after an auto-restart of
   * a kernel that died busy (its activity watcher still says busy), so the client must make sure itself. A kernel
   * that never publishes a status for kernel_info is accepted after a few nudges.
   */
  #handshake(signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const retryMs = this.#opts.kernelInfoRetryMs ?? 1000;
      let timer: Timer | undefined;
      let reply: Record<string, unknown> | undefined;
      let iopubSeen = false;
      let nudges = 0;
      const cleanup = () => {
        timer?.cancel();
        signal?.removeEventListener('abort', onAbort);
        if (this.#infoWaiter === waiter) this.#infoWaiter = undefined;
      };
      const onAbort = () => {
        cleanup();
        reject(signal?.reason);
      };
      const finish = () => {
        cleanup();
        const content = reply ?? {};
        const languageInfo = content.language_info as { name?: unknown } | undefined;
        this.#kernelInfo = { language: String(languageInfo?.name ?? ''), content };
        resolve();
      };
      const send = () => {
        const msg = createMessage('shell', 'kernel_info_request', this.sessionId, {});
        waiter.ids.add(msg.header.msg_id);
        this.#channel.send(msg);
      };
      const tick = () => {
        if (reply) {
          if (nudges >= IOPUB_NUDGES) {
            finish();
            return;
          }
          nudges++;
        }
        send();
        timer = this.#clock.setTimer(tick, reply ? IOPUB_NUDGE_MS : retryMs);
      };
      const waiter: KernelInfoWaiter = {
        ids: new Set(),
        fail: (error) => {
          cleanup();
          reject(error);
        },
        done: (content) => {
          if (reply) return;
          reply = content;
          if (iopubSeen) {
            finish();
            return;
          }
          timer?.cancel();
          timer = this.#clock.setTimer(tick, IOPUB_NUDGE_MS);
        },
        iopub: () => {
          iopubSeen = true;
          if (reply) finish();
        },
      };
      this.#infoWaiter = waiter;
      signal?.addEventListener('abort', onAbort, { once: true });
      tick();
    });
  }

  async #step(code: string, step: 'environment' | 'prelude', scope: AbortScope): Promise<void> {
    const result = await this.#execute(
      code,
      { signal: scope.signal, silent: step === 'environment', storeHistory: false },
      false,
    );
    if (result.cancelled) {
      if (scope.timedOut) {
        throw new DeadlineExceededError(`Failed to initialize kernel ${step}`, { cause: scope.signal.reason });
      }
      throw scope.signal.reason;
    }
    if (result.status !== 'ok') {
      const why = result.error ? `: ${result.error.ename}: ${result.error.evalue}` : ` (status ${result.status})`;
      throw new KernelStartError(`Failed to initialize kernel ${step}${why}`);
    }
  }

  #environmentCode(cwd: string | undefined, env: Record<string, string> | undefined): string {
    const language = (this.#kernelInfo?.language ?? '').toLowerCase();
    if (language === 'python') {
      const lines = ['import os as _kernelwarden_os'];
      if (cwd !== undefined) lines.push(`_kernelwarden_os.chdir(${JSON.stringify(cwd)})`);
      if (env !== undefined) lines.push(`_kernelwarden_os.environ.update(${JSON.stringify(env)})`);
      lines.push('del _kernelwarden_os');
      return lines.join('\n');
    }
    if (language === 'r') {
      const lines: string[] = [];
      if (cwd !== undefined) lines.push(`setwd(${JSON.stringify(cwd)})`);
      const entries = Object.entries(env ?? {});
      if (entries.length > 0) {
        const names = entries.map(([k]) => JSON.stringify(k)).join(', ');
        const values = entries.map(([, v]) => JSON.stringify(v)).join(', ');
        lines.push(`invisible(do.call(Sys.setenv, setNames(as.list(c(${values})), c(${names}))))`);
      }
      lines.push('invisible(NULL)');
      return lines.join('\n');
    }
    throw new KernelStartError(
      `Failed to initialize kernel environment: cwd/env are supported for Python and R kernels, not "${language || 'unknown'}"`,
    );
  }
}

/** Deletes a kernel left by a failed start, retried in the background as the start options say. */
function startCleanup(opts: ParsedStart, clock: Clock, attemptDelete: (signal: AbortSignal) => Promise<boolean>) {
  return deleteUntilConfirmed(attemptDelete, {
    clock,
    timeoutMs: opts.cleanupTimeoutMs ?? DEFAULT_CLEANUP_TIMEOUT_MS,
    retry: { ...DEFAULT_CLEANUP_RETRY, ...opts.cleanupRetry },
  });
}

function gatewayFrom(options: GatewayClientOptions): GatewayClient {
  try {
    return new GatewayClient(options);
  } catch (error) {
    if (!InvalidOptionsError.isInstance(error)) throw error;
    const issues = error.issues.map((i) => ({ path: i.path ? `gateway.${i.path}` : 'gateway', message: i.message }));
    throw new InvalidOptionsError(issues, { subject: 'GatewayKernel.start options', cause: error });
  }
}

async function createKernel(
  client: GatewayClient,
  opts: ParsedStart,
  scope: AbortScope,
  clock: Clock,
): Promise<KernelModel> {
  const attempts = opts.createAttempts ?? 3;
  const name = opts.kernelName ?? 'python3';
  for (let attempt = 1; ; attempt++) {
    scope.throwIfAborted();
    // The create itself is not aborted: if the caller gives up while it is in flight, a kernel that gets created
    // anyway is deleted as soon as its id is known (retried until confirmed), instead of leaking.
    const creating = client.createKernel({ name });
    try {
      return await scope.race(creating);
    } catch (error) {
      if (scope.signal.aborted) {
        creating.then(
          (model) =>
            startCleanup(opts, clock, async (signal) => {
              await client.deleteKernel(model.id, { timeoutMs: 0, signal });
              return true;
            }),
          () => {},
        );
        throw scope.signal.reason;
      }
      const retry = KernelStartError.isInstance(error) && error.retryable && attempt < attempts;
      if (!retry) throw error;
    }
    await new Promise<void>((resolve, reject) => {
      const timer = clock.setTimer(resolve, 200 * attempt);
      scope.signal.addEventListener(
        'abort',
        () => {
          timer.cancel();
          reject(scope.signal.reason);
        },
        { once: true },
      );
    });
  }
}
