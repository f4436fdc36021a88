import { randomUUID } from 'node:crypto';
import {
  abortScope,
  type ExecuteOptions,
  type ExecuteResult,
  InvalidOptionsError,
  type KernelHandle,
  type KillOutcome,
  TypedEmitter,
} from '@kernelwarden/core';
import { createMessage, type JupyterMessage } from '@kernelwarden/jupyter-protocol';
import { KernelChannel } from './channel.js';
import { environmentCode } from './environment-code.js';
import { GatewayDownError, type KernelDeathReason, KernelDiedError, type ProtocolError } from './errors.js';
import { CellExecution } from './execution.js';
import type { GatewayClient, KernelModel } from './gateway-client.js';
import {
  type GatewayKernelConnectOptions,
  type GatewayKernelStartOptions,
  type ResolvedGatewayKernelOptions,
  resolveGatewayKernelOptions,
} from './gateway-kernel-options.js';
import { Handshake, type KernelInfo } from './handshake.js';
import { Heartbeat } from './heartbeat.js';
import { InterruptDrain } from './interrupt-drain.js';
import type { GatewayKernelEventMap, GatewayKernelListener, KernelStatus } from './kernel-events.js';
import { kernelJournalCapability } from './kernel-journal.js';
import { claimPooledKernel, type StartingKernel, startKernel, startPlaced } from './kernel-start.js';
import { LimitDeaths } from './limit-deaths.js';
import { LivenessPoll, probeKernel } from './liveness.js';
import { type MessageTargets, routeMessage } from './message-router.js';
import { MessageSequence } from './message-sequence.js';
import { PendingCells } from './pending-cells.js';
import { PongPolicy } from './pong-policy.js';
import { RestartRecovery } from './restart-recovery.js';
import { SendGate } from './send-gate.js';
import type { StartWatch } from './start-watch.js';
import { answerInputRequest } from './stdin-reply.js';

export type { GatewayKernelConnectOptions, GatewayKernelStartOptions, KernelInfo };

/**
 * A kernel running on a Jupyter Server or Kernel Gateway, driven over REST and the channels WebSocket.
 *
 * Start one with `GatewayKernel.start()`; it implements `KernelHandle` (execute, interrupt, kill, restart,
 * shutdown), reports `status` and emits events (`on('status', …)`), and shuts down on `await using`. It is the
 * facade over the modules that do the work: `KernelChannel` (the socket), `Handshake`, `PendingCells` (where a cell
 * completes), `CellExecution` and `CellOutput` (where its output is assembled), `InterruptDrain`, `RestartRecovery`,
 * `LivenessPoll`, `Heartbeat` and `PongPolicy`.
 */
export class GatewayKernel implements KernelHandle, AsyncDisposable {
  #id: string;
  /** The session id of the channels socket (kept across reconnects so the server replays buffered output). */
  readonly sessionId: string;
  /** The REST client this kernel uses. */
  readonly client: GatewayClient;
  /** The kernelspec name. */
  readonly kernelName: string;
  readonly #opts: ResolvedGatewayKernelOptions;
  readonly #events = new TypedEmitter<GatewayKernelEventMap>();
  readonly #sequence = new MessageSequence();
  readonly #gate = new SendGate();
  readonly #channel: KernelChannel;
  readonly #handshake: Handshake;
  readonly #cells: PendingCells;
  readonly #drain: InterruptDrain;
  readonly #restarts: RestartRecovery;
  readonly #poll: LivenessPoll;
  readonly #heartbeat: Heartbeat;
  readonly #pong: PongPolicy;
  #limits: LimitDeaths;
  /** True while `kill()` replaces the kernel: the old kernel's statuses are not this handle's any more. */
  #replacing = false;
  #status: KernelStatus = 'starting';
  #alive = true;
  #shutdownConfirmed = false;
  #shutdownInFlight: Promise<{ confirmed: boolean }> | undefined;
  /** Set from create until the first handshake completes: a death then fails the start at once. */
  #startWatch: StartWatch | undefined;
  #droppedMessages = 0;

  private constructor(model: KernelModel, opts: ResolvedGatewayKernelOptions) {
    const { client, clock } = opts;
    this.#id = model.id;
    this.kernelName = model.name;
    this.client = client;
    this.sessionId = randomUUID();
    this.#opts = opts;
    const journal = kernelJournalCapability(model) !== undefined;
    const channel = KernelChannel.forKernel(
      client,
      model.id,
      this.sessionId,
      { ...opts, journal },
      {
        onMessage: (msg) => {
          routeMessage(msg, targets);
          this.#pong.received();
        },
        onProtocolError: (error) => this.#protocolError(error),
        onFrameTooLarge: (error) => {
          this.#droppedMessages++;
          const cell = this.#cells.lostFrame(error.message);
          this.#events.emit('protocol-error', cell ? { error, cellId: cell.cellId } : { error });
        },
        onReconnecting: (attempt, delayMs) => {
          if (attempt === 1) this.#cells.markCrossedReconnect();
          this.#events.emit('reconnecting', { attempt, delayMs });
          if (attempt === 1) void this.#checkGone();
        },
        onReconnected: () => {
          this.#probeAfterReconnect();
          this.#events.emit('reconnected', {});
        },
        onJournalResumed: () => this.#cells.clearCrossedReconnect(),
        quiet: () => this.#cells.size === 0,
        onJournalLost: () => this.#cells.markAllDropped(),
        onLost: (error) => {
          this.#events.emit('connection-lost', { error });
          void this.#lost(error);
        },
      },
    );
    this.#channel = channel;
    const alive = () => this.#alive;
    const busy = () => this.#alive && this.#cells.size > 0;
    const handshake = new Handshake({
      clock,
      sessionId: this.sessionId,
      send: (msg) => channel.send(msg),
      retryMs: opts.kernelInfoRetryMs,
      nudgeMs: opts.iopubNudgeMs,
      nudges: opts.iopubNudges,
    });
    this.#handshake = handshake;
    this.#limits = new LimitDeaths(client.diagnostics, this.id);
    this.#limits.mark();
    const restarts = new RestartRecovery({
      clock,
      client,
      kernelId: () => this.id,
      restartTimeoutMs: opts.restartTimeoutMs,
      recovery: opts.recovery,
      gate: this.#gate,
      cells: { failAll: (error) => this.#cells.failAll(error) },
      reconnect: async (signal) => {
        await channel.reopen(signal);
        await handshake.run(signal);
      },
      alive,
      checkGone: () => this.#checkGone(),
      giveUp: (cause) =>
        this.#die(
          'dead',
          `Kernel ${this.id} at ${client.baseUrl} did not come back after the server restarted it`,
          cause,
        ),
      ready: () => this.#setStatus('idle'),
      oomDeath: () => this.#limits.oomDeath(),
    });
    this.#restarts = restarts;
    const cells = new PendingCells({
      clock,
      idleGraceMs: opts.idleGraceMs,
      replyGraceMs: opts.replyGraceMs,
      sequence: this.#sequence,
      socket: { received: () => channel.received, listening: () => channel.isOpen && !restarts.recovering },
      onGraceSettled: () => {
        if (cells.size === 0 && this.#status === 'busy') this.#setStatus('idle');
      },
    });
    this.#cells = cells;
    const interrupt = () => void this.interrupt().catch(() => {});
    const drainMs = opts.interruptDrainMs;
    this.#drain = new InterruptDrain({ clock, drainMs, cells, gate: this.#gate, alive, interrupt });
    this.#poll = new LivenessPoll({
      clock,
      everyMs: opts.livenessPollMs,
      socket: channel,
      busy,
      recovering: () => restarts.recovering,
      check: () => this.#checkGone(),
    });
    this.#heartbeat = new Heartbeat({ clock, silentMs: opts.heartbeatMs, socket: channel, busy });
    this.#pong = new PongPolicy({
      enabled: opts.stallWorkaround,
      clock,
      socket: channel,
      demand: { handshaking: () => handshake.active, cells: () => cells.values() },
    });
    const stdin = { sessionId: this.sessionId, alive, send: (msg: JupyterMessage) => channel.send(msg) };
    const targets: MessageTargets = {
      sessionId: this.sessionId,
      sequence: this.#sequence,
      handshake,
      cells,
      ownStatus: (state) => {
        if (this.#status !== 'restarting' && this.#alive) this.#setStatus(state);
      },
      serverStatus: (state) => this.#serverRestarted(state),
      inputRequest: (cell, msg) => void answerInputRequest(cell, msg, stdin),
    };
  }

  /**
   * Creates a kernel, connects its channels, waits for its `kernel_info_reply`, applies `cwd`/`env`, runs the
   * prelude, and resolves with the ready kernel — all under one deadline (`startupTimeoutMs`) and the caller's signal.
   *
   * Any failure after the kernel exists closes the socket and DELETEs the kernel before the promise settles (a start
   * that failed on its own waits up to `cleanupTimeoutMs` for that DELETE; an aborted one rejects at once with the
   * signal's reason; an unconfirmed DELETE is retried in the background, `cleanupRetry`). A step that runs out of
   * time rejects with `name: 'TimeoutError'` and `Failed to initialize kernel environment` / `… prelude`; a create
   * that never succeeds with `KernelStartError` (`Failed to create kernel …`, with `status`); a kernel that dies
   * before it first answers, within seconds, with `KernelStartError` (`… died while starting: …`, with its last
   * stderr lines on a `LocalGateway` lease).
   */
  static async start(options: GatewayKernelStartOptions): Promise<GatewayKernel> {
    const opts = resolveGatewayKernelOptions(options);
    const start = (o: ResolvedGatewayKernelOptions) =>
      startKernel(o, (model) => {
        const kernel = new GatewayKernel(model, o);
        return { kernel, starting: kernel.#starting() };
      });
    const router = opts.client.router;
    return router ? startPlaced(router, opts, start) : start(opts);
  }

  /**
   * Attaches to a kernel that already runs on the gateway (`kernelId`): connects its channels, waits for its
   * `kernel_info_reply`, applies `cwd`/`env` and runs the prelude, like `start()` after its create. The kernel's
   * kernelspec is the gateway's; a failure closes the socket and leaves the kernel running (it is not this call's to
   * delete); `shutdown()` of the handle deletes it as usual.
   */
  static async connect(options: GatewayKernelConnectOptions): Promise<GatewayKernel> {
    if (typeof options?.kernelId !== 'string' || options.kernelId === '') {
      throw new InvalidOptionsError([{ path: 'kernelId', message: 'must be the id of a kernel of the gateway' }], {
        subject: 'GatewayKernel.connect options',
      });
    }
    let opts = resolveGatewayKernelOptions(options);
    const router = opts.client.router;
    let member: GatewayClient | undefined;
    if (router) {
      const owner = await opts.client.getKernel(options.kernelId, opts.signal ? { signal: opts.signal } : {});
      member = owner ? router.clientFor(options.kernelId) : undefined;
      if (member) opts = Object.freeze({ ...opts, client: member });
    }
    const kernel = await startKernel(
      opts,
      (model) => {
        const kernel = new GatewayKernel(model, opts);
        return { kernel, starting: kernel.#starting() };
      },
      { kind: 'attach', kernelId: options.kernelId },
    );
    if (router && member) router.placed(member, kernel);
    return kernel;
  }

  /** What the start sequence (`startKernel`) drives. */
  #starting(): StartingKernel {
    const handshake = this.#handshake;
    return {
      connect: async (signal) => {
        await this.#channel.open(signal);
        await handshake.run(signal);
      },
      watch: (watch) => {
        this.#startWatch = watch;
      },
      get info() {
        return handshake.info;
      },
      step: (code, opts) => this.#execute(code, opts, false),
      ready: () => {
        if (this.#status === 'starting' || this.#status === 'busy') this.#setStatus('idle');
      },
      shutdown: (opts) => this.shutdown(opts),
      abandon: () => this.#abandon(),
    };
  }

  /** The gateway's kernel id (a `kill()` on a gateway with a pool of kernels may move the handle to another). */
  get id(): string {
    return this.#id;
  }

  /** The kernel's current state. */
  get status(): KernelStatus {
    return this.#status;
  }

  /** The kernel's `kernel_info_reply` (language and versions), once the start handshake completed. */
  get info(): KernelInfo | undefined {
    return this.#handshake.info;
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

  /**
   * Messages received and dropped because they broke the protocol (malformed, too large, or failing to be handled),
   * whether or not a cell could be named for them; each was also reported as a `protocol-error` event.
   */
  get droppedMessages(): number {
    return this.#droppedMessages;
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
    return this.#execute(code, opts, true);
  }

  #execute(code: string, opts: ExecuteOptions, interruptOnCancel: boolean, direct = false): Promise<ExecuteResult> {
    if (!this.#alive) return Promise.reject(this.#notAlive());
    const cellId = opts.cellId ?? randomUUID();
    const silent = opts.silent ?? false;
    const content = {
      code,
      silent,
      store_history: opts.storeHistory ?? !silent,
      user_expressions: {},
      allow_stdin: opts.onInput !== undefined,
      stop_on_error: this.#opts.stopOnError,
    };
    const msg = createMessage('shell', 'execute_request', this.sessionId, content, { metadata: { cellId } });
    const { origin } = opts;
    const cell = new CellExecution({
      msgId: msg.header.msg_id,
      cellId,
      opts,
      caps: this.#opts.outputCaps,
      sequenceMark: this.#sequence.mark(),
      onDropped: () => this.#events.emit('output-dropped', origin === undefined ? { cellId } : { cellId, origin }),
    });
    if (opts.signal?.aborted) {
      cell.abort({ cancelled: true });
      return cell.result;
    }
    if (opts.signal || (opts.timeoutMs !== undefined && opts.timeoutMs > 0)) {
      const s = abortScope({ signal: opts.signal, timeoutMs: opts.timeoutMs, clock: this.#opts.clock });
      const onAbort = () => this.#drain.cancel(cell, { timedOut: s.timedOut, interrupt: interruptOnCancel });
      s.signal.addEventListener('abort', onAbort, { once: true });
      cell.onSettled(() => {
        s.signal.removeEventListener('abort', onAbort);
        s.dispose();
      });
    }
    this.#limits.mark();
    this.#cells.add(cell);
    this.#poll.schedule();
    this.#heartbeat.schedule();
    const send = () => {
      if (!cell.settled && this.#alive) this.#channel.send(msg);
    };
    // A cell of a kernel replacement runs while other requests wait at the gate for it.
    if (direct) send();
    else this.#gate.whenOpen(send);
    return cell.result;
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
   * Hard stop of the interpreter. On a gateway on this machine that keeps a pool of started kernels (a `LocalGateway`
   * lease), at once: every process of the kernel is killed (SIGKILL), the handle moves to a pooled kernel of the same
   * kernelspec (its `id` changes; `cwd` and `env` are applied to it again) and the old kernel is deleted in the
   * background; with no pooled kernel ready, the server restarts the dead kernel under its id. Elsewhere, the
   * gateway's restart, which first asks the kernel to shut down, kills it when it ignores that, and starts a fresh one
   * under the same id. Resolves `{ restarted: true }`: the handle stays usable, with fresh state, so a caller that
   * kills in order to restart (the watchdog) need not `restart()` again.
   */
  async kill(opts: { signal?: AbortSignal } = {}): Promise<KillOutcome> {
    if (this.client.processes) await this.#replace(opts.signal);
    else await this.#restart(opts);
    return { restarted: this.#alive };
  }

  /** `kill()` on a gateway that can kill kernel processes itself: kill at once, then a pooled kernel or a restart. */
  async #replace(signal: AbortSignal | undefined): Promise<void> {
    if (!this.#alive) throw this.#notAlive();
    this.#setStatus('restarting');
    this.#cells.abortAll();
    this.#replacing = true;
    try {
      await this.#restarts.restart(signal, {
        swap: (s) => this.#swapKilled(s),
        prepare: (s) => this.#reapplyEnvironment(s),
      });
    } finally {
      this.#replacing = false;
    }
  }

  /** Kills the kernel's processes and points the handle at a pooled kernel (true), or restarts the dead one. */
  async #swapKilled(signal: AbortSignal | undefined): Promise<boolean> {
    const old = this.#id;
    const { client, restartTimeoutMs, clock } = this.#opts;
    client.processes?.kill(old);
    const scope = abortScope({ signal, timeoutMs: restartTimeoutMs, clock });
    try {
      const model = await claimPooledKernel(client, { ...this.#opts, kernelName: this.kernelName }, scope);
      if (!model) {
        await client.restartKernel(old, { signal: scope.signal, timeoutMs: restartTimeoutMs });
        return false;
      }
      this.#id = model.id;
      this.#channel.retarget(client, model.id);
      this.#limits = new LimitDeaths(client.diagnostics, model.id);
      this.#limits.mark();
      // Its processes are gone: the server's shutdown of it returns at once. An unconfirmed DELETE leaves its owner
      // record (this process), so the gateway reaps it when this process ends.
      void client.deleteKernel(old, { timeoutMs: this.#opts.shutdownTimeoutMs }).catch(() => {});
      return true;
    } finally {
      scope.dispose();
    }
  }

  /** The start's `cwd` and `env`, applied again to a kernel that replaced the killed one. */
  async #reapplyEnvironment(signal: AbortSignal | undefined): Promise<void> {
    const { cwd, env } = this.#opts;
    if (cwd === undefined && env === undefined) return;
    const code = environmentCode(this.#handshake.info?.language ?? '', cwd, env);
    await this.#execute(code, { silent: true, storeHistory: false, ...(signal ? { signal } : {}) }, false, true);
  }

  /**
   * Fresh interpreter state on the same handle (`POST …/restart`), then the channels are reopened. Status goes
   * `restarting` → `idle`; executions in flight resolve with `status: 'aborted'`.
   */
  async restart(opts: { signal?: AbortSignal } = {}): Promise<void> {
    await this.#restart(opts);
  }

  async #restart(opts: { signal?: AbortSignal }): Promise<void> {
    if (!this.#alive) throw this.#notAlive();
    this.#setStatus('restarting');
    this.#cells.abortAll();
    await this.#restarts.restart(opts.signal);
  }

  /**
   * Stops the kernel for good: closes the socket, resolves pending executions as cancelled, then `DELETE`s it.
   * A 2xx, 404 or 410 is `{ confirmed: true }`; an error, a thrown fetch or the timeout (`timeoutMs`, else the
   * start's `shutdownTimeoutMs`) is `{ confirmed: false }`. Never throws. An unconfirmed shutdown may be retried
   * (another DELETE); once confirmed, nothing is sent again.
   */
  shutdown(opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<{ confirmed: boolean }> {
    if (this.#shutdownConfirmed) return Promise.resolve({ confirmed: true });
    if (this.#shutdownInFlight) return this.#shutdownInFlight;
    this.#close();
    const message = `Kernel ${this.id} at ${this.client.baseUrl} was shut down`;
    this.#handshake.fail(new KernelDiedError(message, { reason: 'shutdown', kernelId: this.id }));
    this.#cells.abortAll({ cancelled: true });
    if (this.#status !== 'dead') this.#setStatus('closed');
    const timeoutMs = opts.timeoutMs ?? this.#opts.shutdownTimeoutMs;
    const attempt = (async () => {
      try {
        await this.client.deleteKernel(this.id, { timeoutMs, signal: opts.signal });
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

  /**
   * Lets go of the kernel without stopping it: closes the channels socket and settles pending executions as
   * cancelled, and leaves the kernel running on the gateway for whoever attaches to it next (`GatewayKernel.connect`,
   * or a warm pool handing it to another process). The handle is then closed (`isAlive()` false); `shutdown()` is
   * still the way to delete the kernel.
   */
  detach(): void {
    if (!this.#alive) return;
    this.#abandon('was detached');
  }

  /** Closes the socket and settles everything, leaving the kernel on the gateway to its owner. */
  #abandon(why = 'was not attached'): void {
    this.#close();
    const error = new KernelDiedError(`Kernel ${this.id} at ${this.client.baseUrl} ${why}`, {
      reason: 'shutdown',
      kernelId: this.id,
    });
    this.#handshake.fail(error);
    this.#cells.abortAll({ cancelled: true });
    this.#setStatus('closed');
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

  /**
   * After the channels socket reopened with cells pending: a `kernel_info_request` on shell, queued behind them. Its
   * reply proves the kernel answered every earlier request, so a cell whose reply is still missing then was lost with
   * the dead socket and settles after `replyGraceMs` (see `PendingCells.probeSent`) instead of waiting for ever.
   */
  #probeAfterReconnect(): void {
    if (!this.#alive || this.#cells.size === 0) return;
    const probe = createMessage('shell', 'kernel_info_request', this.sessionId, {});
    if (this.#cells.probeSent(probe.header.msg_id)) this.#channel.send(probe);
  }

  /**
   * A message was dropped for breaking the protocol: counted, and reported as `protocol-error`; the cell it answered,
   * when one of this handle's is named by its parent, settles as an error when it completes.
   */
  #protocolError(error: ProtocolError): void {
    this.#droppedMessages++;
    const parentId = error.parentMsgId;
    const cell = parentId === undefined ? undefined : this.#cells.get(parentId);
    cell?.markProtocolError(error.message);
    this.#events.emit('protocol-error', cell ? { error, cellId: cell.cellId } : { error });
  }

  /** An unsolicited `restarting` or `dead` status: the server's auto-restarter, after a crash or `kill -9`. */
  #serverRestarted(state: 'restarting' | 'dead'): void {
    if (!this.#alive || this.#replacing) return;
    if (this.#startWatch) {
      this.#startWatch.statusSeen(state);
      return;
    }
    if (state === 'dead') {
      this.#die('dead', `Kernel ${this.id} at ${this.client.baseUrl} died and the server could not restart it`);
      return;
    }
    this.#setStatus('restarting');
    this.#restarts.serverRestarting();
  }

  /** Closes the socket and stops every timer of the kernel; it is no longer alive. */
  #close(): void {
    this.#alive = false;
    this.#poll.stop();
    this.#heartbeat.stop();
    this.#pong.stop();
    this.#channel.close();
  }

  #die(reason: KernelDeathReason, message: string, cause?: unknown): void {
    this.#fail(new KernelDiedError(message, { reason, kernelId: this.id, cause }));
  }

  #fail(error: KernelDiedError): void {
    if (!this.#alive) return;
    this.#close();
    this.#setStatus('dead');
    this.#handshake.fail(error);
    this.#cells.failAll(error);
  }

  /**
   * The kernel's gateway was found down (by a `GatewaySet`'s health check): the handle dies at once, its pending
   * executions reject with `GatewayDownError` naming the gateway, and nothing is sent to the gateway.
   * @internal
   */
  gatewayDown(cause?: unknown): void {
    const url = this.client.baseUrl;
    this.#fail(
      new GatewayDownError(
        `Gateway ${url} stopped answering; kernel ${this.id} on it is lost with its state (start a new kernel)`,
        { url, kernelId: this.id, cause },
      ),
    );
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
    const probe = await probeKernel(this.client, this.id, this.#opts.livenessTimeoutMs);
    if (probe === 'alive' || probe === 'unknown') return false;
    this.#die(
      probe,
      probe === 'dead'
        ? `Kernel ${this.id} at ${this.client.baseUrl} is dead`
        : `Kernel ${this.id} vanished from the gateway at ${this.client.baseUrl} (it was shut down or culled elsewhere)`,
    );
    return true;
  }
}
