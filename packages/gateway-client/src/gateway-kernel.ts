import { randomUUID } from 'node:crypto';
import {
  type ExecuteOptions,
  type ExecuteResult,
  type KernelHandle,
  type KillOutcome,
  TypedEmitter,
} from '@kernelwarden/core';
import { cellRequest } from './cell-request.js';
import type { KernelChannel } from './channel.js';
import { type CollectCellOptions, type CollectedCell, collectCell } from './collect-cell.js';
import { type KernelDeathReason, KernelDiedError, type KernelStartError } from './errors.js';
import type { GatewayClient, KernelModel } from './gateway-client.js';
import {
  type GatewayKernelConnectOptions,
  type GatewayKernelStartOptions,
  type ResolvedGatewayKernelOptions,
  resolveGatewayKernelOptions,
} from './gateway-kernel-options.js';
import type { Handshake, KernelInfo } from './handshake.js';
import type { Heartbeat } from './heartbeat.js';
import type { InterruptDrain } from './interrupt-drain.js';
import { attachKernel } from './kernel-attach.js';
import { kernelDeaths } from './kernel-deaths.js';
import type { GatewayKernelEventMap, GatewayKernelListener, KernelStatus } from './kernel-events.js';
import { environmentStep, swapKilledKernel } from './kernel-kill.js';
import { assembleKernelParts, startingKernel } from './kernel-parts.js';
import { KernelShutdown } from './kernel-shutdown.js';
import { type StartingKernel, startKernel, startPlaced, startStepError } from './kernel-start.js';
import { LimitDeaths } from './limit-deaths.js';
import { type LivenessPoll, probeKernel } from './liveness.js';
import { MessageSequence } from './message-sequence.js';
import type { PendingCells } from './pending-cells.js';
import type { PongPolicy } from './pong-policy.js';
import type { RestartRecovery } from './restart-recovery.js';
import { SendGate } from './send-gate.js';
import type { StartWatch } from './start-watch.js';

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
  /** The failure of an environment step sent ahead (`environmentStep: 'ahead'`): every execution rejects with it. */
  #refused: KernelStartError | undefined;
  /**
   * An environment step sent ahead, until it ended ok: resolves then, rejects with its failure. A cell sent meanwhile
   * settles only after it, whatever its own reply said first (an `aborted` reply can overtake the step's idle status).
   */
  #ahead: Promise<void> | undefined;
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
  readonly #shutdown = new KernelShutdown();
  /** Set from create until the first handshake completes: a death then fails the start at once. */
  #startWatch: StartWatch | undefined;
  #droppedMessages = 0;

  private constructor(model: KernelModel, opts: ResolvedGatewayKernelOptions) {
    const { client } = opts;
    this.#id = model.id;
    this.kernelName = model.name;
    this.client = client;
    this.sessionId = randomUUID();
    this.#opts = opts;
    this.#limits = new LimitDeaths(client.diagnostics, this.id);
    this.#limits.mark();
    ({
      channel: this.#channel,
      handshake: this.#handshake,
      cells: this.#cells,
      drain: this.#drain,
      restarts: this.#restarts,
      poll: this.#poll,
      heartbeat: this.#heartbeat,
      pong: this.#pong,
    } = assembleKernelParts(model, opts, {
      sessionId: this.sessionId,
      events: this.#events,
      sequence: this.#sequence,
      gate: this.#gate,
      id: () => this.id,
      alive: () => this.#alive,
      status: () => this.#status,
      setStatus: (status) => this.#setStatus(status),
      limits: () => this.#limits,
      dropped: () => {
        this.#droppedMessages++;
      },
      checkGone: () => this.#checkGone(),
      lost: (error) => void this.#lost(error),
      die: (reason, message, cause) => this.#die(reason, message, cause),
      serverRestarted: (state) => this.#serverRestarted(state),
      interrupt: () => void this.interrupt().catch(() => {}),
    }));
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
   * stderr lines on a `LocalGateway` ticket).
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
  static connect(options: GatewayKernelConnectOptions): Promise<GatewayKernel> {
    return attachKernel(options, (model, opts) => {
      const kernel = new GatewayKernel(model, opts);
      return { kernel, starting: kernel.#starting() };
    });
  }

  /** Attaches to a kernel that already runs on the gateway: `connect()`. */
  static attach(options: GatewayKernelConnectOptions): Promise<GatewayKernel> {
    return GatewayKernel.connect(options);
  }

  /**
   * The complete result of a cell of this kernel, read from its journal by the `msg_id` of its `execute_request` (the
   * `execute-request` event's), whichever process sent it — one that went away included: waits until the cell
   * finished (`waitMs` bounds that), see `collectCell()`. Rejects with `KernelJournalUnavailableError` on a server
   * without a journal (a stock jupyter-server).
   */
  collect(msgId: string, opts: CollectCellOptions = {}): Promise<CollectedCell> {
    return collectCell(this.client, this.id, msgId, { waitMs: Number.POSITIVE_INFINITY, ...opts });
  }

  /** What the start sequence (`startKernel`) drives. */
  #starting(): StartingKernel {
    return startingKernel(this.#channel, this.#handshake, {
      watch: (watch) => {
        this.#startWatch = watch;
      },
      step: (code, opts) => this.#execute(code, opts, false),
      stepAhead: (code) => {
        const ahead = this.#execute(code, { silent: true, storeHistory: false }, false).then(
          (result) => {
            if (this.#ahead === ahead) this.#ahead = undefined;
            if (result.status === 'ok' || result.cancelled) return;
            this.#refused = startStepError('environment', result);
            throw this.#refused;
          },
          () => {
            // The kernel died or was closed: its cells are failed as such.
            if (this.#ahead === ahead) this.#ahead = undefined;
          },
        );
        ahead.catch(() => {});
        this.#ahead = ahead;
      },
      ready: () => {
        if (this.#status === 'starting' || this.#status === 'busy') this.#setStatus('idle');
      },
      shutdown: (opts) => this.shutdown(opts),
      abandon: () => this.#abandon(),
    });
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
    if (this.#refused) return Promise.reject(this.#refused);
    const { msg, cell } = cellRequest(code, opts, {
      sessionId: this.sessionId,
      stopOnError: this.#opts.stopOnError,
      outputCaps: this.#opts.outputCaps,
      sequence: this.#sequence,
      clock: this.#opts.clock,
      dropped: (event) => this.#events.emit('output-dropped', event),
      cancel: (c, timedOut) => this.#drain.cancel(c, { timedOut, interrupt: interruptOnCancel }),
    });
    if (cell.settled) return cell.result;
    this.#limits.mark();
    this.#cells.add(cell);
    this.#poll.schedule();
    this.#heartbeat.schedule();
    const send = () => {
      if (cell.settled || !this.#alive) return;
      this.#channel.send(msg);
      const { cellId, msgId } = cell;
      this.#events.emit(
        'execute-request',
        opts.origin === undefined ? { cellId, msgId } : { cellId, msgId, origin: opts.origin },
      );
    };
    // A cell of a kernel replacement runs while other requests wait at the gate for it.
    if (direct) send();
    else this.#gate.whenOpen(send);
    const ahead = this.#ahead;
    if (!ahead) return cell.result;
    cell.result.catch(() => {});
    return ahead.then(() => cell.result);
  }

  /**
   * Asks the gateway to interrupt the kernel (`POST …/interrupt`); `delivered` says whether the gateway accepted.
   * Requests made meanwhile are sent once the gateway answered: an interrupt meant for the cell running now never
   * lands on a cell `execute()`d after it. Never throws, except with the signal's reason when `signal` aborts.
   */
  async interrupt(opts: { signal?: AbortSignal } = {}): Promise<{ delivered: boolean }> {
    if (!this.#alive) return { delivered: false };
    try {
      const request = this.client.interruptKernel(this.id, { signal: opts.signal });
      this.#gate.hold(request);
      await request;
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
    await this.#restart(opts.signal, this.client.processes !== undefined);
    return { restarted: this.#alive };
  }

  /** Points the handle at the kernel that replaced the killed one. */
  #moveTo(kernelId: string): void {
    this.#id = kernelId;
    this.#channel.retarget(this.client, kernelId);
    this.#limits = new LimitDeaths(this.client.diagnostics, kernelId);
    this.#limits.mark();
  }

  /**
   * Fresh interpreter state on the same handle (`POST …/restart`), then the channels are reopened. Status goes
   * `restarting` → `idle`; executions in flight resolve with `status: 'aborted'`.
   */
  async restart(opts: { signal?: AbortSignal } = {}): Promise<void> {
    await this.#restart(opts.signal);
  }

  /**
   * The server's restart of the kernel, or (`replace`, on a gateway that kills kernel processes itself) a kill at
   * once, then a pooled kernel with the start's `cwd` and `env` applied again, or the server's restart of the dead one.
   */
  async #restart(signal: AbortSignal | undefined, replace = false): Promise<void> {
    if (!this.#alive) throw this.#notAlive();
    this.#setStatus('restarting');
    this.#cells.abortAll();
    if (!replace) return this.#restarts.restart(signal);
    this.#replacing = true;
    const prepare = async (s: AbortSignal | undefined) => {
      const code = environmentStep(this.#opts, this.#handshake.info?.language ?? '');
      if (code !== undefined) await this.#execute(code, { silent: true, storeHistory: false, signal: s }, false, true);
    };
    const swap = (s: AbortSignal | undefined) =>
      swapKilledKernel(this.#id, this.kernelName, this.#opts, (id) => this.#moveTo(id), s);
    try {
      await this.#restarts.restart(signal, { swap, prepare });
    } finally {
      this.#replacing = false;
    }
  }

  /**
   * Stops the kernel for good: closes the socket, resolves pending executions as cancelled, then `DELETE`s it.
   * A 2xx, 404 or 410 is `{ confirmed: true }`; an error, a thrown fetch or the timeout (`timeoutMs`, else the
   * start's `shutdownTimeoutMs`) is `{ confirmed: false }`. Never throws. An unconfirmed shutdown may be retried
   * (another DELETE); once confirmed, nothing is sent again.
   */
  shutdown(opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<{ confirmed: boolean }> {
    const pending = this.#shutdown.pending();
    if (pending) return pending;
    this.#close();
    this.#handshake.fail(kernelDeaths.closed(this.id, this.client.baseUrl, 'was shut down'));
    this.#cells.abortAll({ cancelled: true });
    if (this.#status !== 'dead') this.#setStatus('closed');
    const timeoutMs = opts.timeoutMs ?? this.#opts.shutdownTimeoutMs;
    return this.#shutdown.send(this.client, this.id, { timeoutMs, signal: opts.signal });
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
    this.#handshake.fail(kernelDeaths.closed(this.id, this.client.baseUrl, why));
    this.#cells.abortAll({ cancelled: true });
    this.#setStatus('closed');
  }

  /** Shuts the kernel down (for `await using`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.shutdown();
  }

  #notAlive(): KernelDiedError {
    return kernelDeaths.notAlive(this.id, this.client.baseUrl, this.#shutdown.asked || this.#status === 'closed');
  }

  #setStatus(status: KernelStatus): void {
    const previous = this.#status;
    if (previous === status) return;
    this.#status = status;
    this.#events.emit('status', { status, previous });
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
    this.#fail(kernelDeaths.gatewayDown(this.id, this.client.baseUrl, cause));
  }

  async #lost(error: Error): Promise<void> {
    if (!(await this.#checkGone())) this.#fail(kernelDeaths.connectionLost(this.id, this.client.baseUrl, error));
  }

  /** Asks REST whether the kernel still exists; fails everything and returns true when it does not. */
  async #checkGone(): Promise<boolean> {
    if (!this.#alive) return true;
    const probe = await probeKernel(this.client, this.id, this.#opts.livenessTimeoutMs);
    if (probe === 'alive' || probe === 'unknown') return false;
    this.#fail(kernelDeaths.probed(this.id, this.client.baseUrl, probe));
    return true;
  }
}
