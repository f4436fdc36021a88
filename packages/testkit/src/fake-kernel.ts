import { randomUUID } from 'node:crypto';
import type { Clock } from '@kernelwarden/core';
import type { JupyterMessage } from '@kernelwarden/jupyter-protocol';
import { Abandoned, type Channel, cellWaits, failedReply, Interrupted, type Running } from './fake-kernel-cell.js';
import { fixedShellReply, kernelInfo, kernelMessage } from './fake-kernel-messages.js';

/** Options of `KernelScriptContext.die()`. */
export interface DieOptions {
  /**
   * True: the server auto-restarts the kernel (iopub `status: restarting`, fresh state), as jupyter_server does after
   * a crash. False: the kernel stays dead (iopub `status: dead`) and is removed from the server.
   * @defaultValue true
   */
  restart?: boolean;
}

/**
 * What a kernel script can do while it answers one `execute_request`: produce outputs, raise, wait, ask for input,
 * hang, ignore interrupts or die. Outputs are sent on iopub at once, with the request as their parent.
 */
export interface KernelScriptContext {
  /** The cell's code. */
  readonly code: string;
  /** The `cellId` from the request's metadata, when the client sent one. */
  readonly cellId: string | undefined;
  /** The full `execute_request` content (`silent`, `store_history`, `allow_stdin`, …). */
  readonly content: Readonly<Record<string, unknown>>;
  /** The execution count this cell got. */
  readonly executionCount: number;
  /** The simulated interpreter state: survives between cells, cleared by restart. */
  readonly state: Map<string, unknown>;
  /** The kernel running the cell. */
  readonly kernel: FakeKernel;
  /** Aborts when the cell is interrupted (unless interrupts are ignored), or the kernel restarts, dies or is deleted. */
  readonly signal: AbortSignal;
  /** Writes to stdout (an iopub `stream` message). */
  stdout(text: string): void;
  /** Writes to stderr (an iopub `stream` message). */
  stderr(text: string): void;
  /** Publishes `display_data`. */
  display(data: Record<string, unknown>, metadata?: Record<string, unknown>): void;
  /** Publishes the cell's `execute_result`. */
  result(data: Record<string, unknown>, metadata?: Record<string, unknown>): void;
  /** Raises an exception: publishes `error` and ends the cell with an error reply. */
  raise(ename: string, evalue: string, traceback?: string[]): never;
  /** Waits `ms` of the gateway's clock; an interrupt raises KeyboardInterrupt. */
  sleep(ms: number): Promise<void>;
  /** Sends an `input_request` on stdin and resolves with the client's `input_reply` value. */
  input(prompt?: string, opts?: { password?: boolean }): Promise<string>;
  /** Waits until interrupted (then raises KeyboardInterrupt) — forever when interrupts are ignored. */
  hang(): Promise<never>;
  /** From now on, interrupts of this kernel are recorded but have no effect. */
  ignoreInterrupts(): void;
  /** Kills the kernel process: the cell never gets a reply. */
  die(opts?: DieOptions): never;
  /** Sends any message on a channel with this request as its parent (e.g. `clear_output`, `comm_msg`). */
  send(channel: 'iopub' | 'shell' | 'stdin' | 'control', msgType: string, content: Record<string, unknown>): void;
  /** Sends raw bytes or text to the client as they are, e.g. a malformed frame. */
  raw(data: string | Uint8Array): void;
}

/**
 * Answers one `execute_request` of a FakeGateway kernel. Returning ends the cell with `status: ok`; throwing a
 * JavaScript error ends it with `status: error` (ename = the error's name).
 */
export type KernelScript = (ctx: KernelScriptContext) => void | Promise<void>;

/** Options of one simulated kernel, set per kernelspec in `FakeGatewayOptions.kernelSpecs`. */
export interface FakeKernelOptions {
  /** Answers `execute_request`s. @defaultValue pythonLikeScript */
  script?: KernelScript;
  /** Interrupts are recorded but do nothing. @defaultValue false */
  ignoreInterrupts?: boolean;
  /**
   * How an interrupted cell ends: `'error'` (ipykernel: a KeyboardInterrupt error) or `'abort'` (IRkernel:
   * `status: 'abort'` and no error message).
   * @defaultValue 'error'
   */
  interruptReply?: 'error' | 'abort';
  /** The kernel's language, reported in `kernel_info_reply`. @defaultValue 'python' */
  language?: string;
}

/** The part of FakeGateway a kernel talks to. @internal */
export interface KernelHost {
  readonly clock: Clock;
  deliver(kernel: FakeKernel, msg: JupyterMessage, toSession: string | undefined): void;
  deliverRaw(kernel: FakeKernel, data: string | Uint8Array): void;
  removed(kernel: FakeKernel): void;
}

/**
 * One simulated kernel inside a FakeGateway: it answers `kernel_info_request` and runs `execute_request`s one at a
 * time through its script, with iopub `status` busy/idle around each request.
 *
 * Get it with `gateway.kernel(id)` to read what happened (`interrupts`, `restarts`, `state`) or to make it misbehave
 * (`ignoreInterrupts`, `die()`, `send()`, `sendRaw()`).
 */
export class FakeKernel {
  /** The kernel id (a UUID, as jupyter_server makes). */
  readonly id: string;
  /** The kernelspec name it was created from. */
  readonly name: string;
  /** The JSON body of the `POST /api/kernels` that created it (`name`, `path`, `env`, …). */
  readonly createBody: Readonly<Record<string, unknown>>;
  /**
   * The environment its launch was given, on an Enterprise Gateway flavoured FakeGateway: the create's `KERNEL_*`
   * variables and those its `clientEnvs` allow, with `KERNEL_USERNAME` and `KERNEL_ID` filled in. Empty elsewhere.
   */
  readonly launchEnv: Readonly<Record<string, string>>;
  /** The simulated interpreter state that scripts use; cleared on restart. */
  readonly state = new Map<string, unknown>();
  /** The kernel's execution counter. */
  executionCount = 0;
  /** `'starting' | 'idle' | 'busy' | 'dead'`. */
  executionState: 'starting' | 'idle' | 'busy' | 'dead' = 'idle';
  /** Interrupts are recorded but do nothing. */
  ignoreInterrupts: boolean;
  /** How an interrupted cell ends. */
  interruptReply: 'error' | 'abort';
  /** How many interrupts (REST or `interrupt_request`) reached the kernel. */
  interrupts = 0;
  /** How many restarts (REST or auto-restart after `die()`) happened. */
  restarts = 0;
  /** Every `execute_request` code, in arrival order. */
  readonly executed: string[] = [];
  /** The ISO time of the last message. */
  lastActivity = new Date().toISOString();

  #session = randomUUID();
  readonly #host: KernelHost;
  readonly #script: KernelScript;
  readonly #language: string;
  readonly #queue: { msg: JupyterMessage; fromSession: string | undefined }[] = [];
  #running: Running | undefined;
  #pumping = false;
  #generation = 0;
  #gone = false;

  /** @internal Made by FakeGateway on `POST /api/kernels`. */
  constructor(
    host: KernelHost,
    name: string,
    createBody: Record<string, unknown>,
    opts: FakeKernelOptions & { script: KernelScript; id?: string; launchEnv?: Record<string, string> },
  ) {
    this.id = opts.id ?? randomUUID();
    this.launchEnv = Object.freeze({ ...opts.launchEnv });
    this.name = name;
    this.createBody = createBody;
    this.#host = host;
    this.#script = opts.script;
    this.ignoreInterrupts = opts.ignoreInterrupts ?? false;
    this.interruptReply = opts.interruptReply ?? 'error';
    this.#language = opts.language ?? 'python';
  }

  /** False once the kernel died for good or was deleted. */
  get alive(): boolean {
    return !this.#gone;
  }

  /** The REST model of the kernel. */
  model(connections: number): Record<string, unknown> {
    return {
      id: this.id,
      name: this.name,
      last_activity: this.lastActivity,
      execution_state: this.executionState,
      connections,
    };
  }

  /** @internal A message from a client on the channels socket. */
  receive(msg: JupyterMessage, fromSession: string | undefined): void {
    if (this.#gone) return;
    this.lastActivity = new Date().toISOString();
    const type = msg.header?.msg_type;
    if (msg.channel === 'stdin') {
      if (type === 'input_reply' && this.#running?.stdinWaiter) {
        const waiter = this.#running.stdinWaiter;
        this.#running.stdinWaiter = undefined;
        waiter(String(msg.content?.value ?? ''));
      }
      return;
    }
    if (msg.channel === 'control') {
      if (type === 'interrupt_request') {
        this.interrupt();
        this.#reply(msg, fromSession, 'interrupt_reply', { status: 'ok' });
      } else if (type === 'kernel_info_request') {
        this.#reply(msg, fromSession, 'kernel_info_reply', kernelInfo(this.#language));
      } else if (type === 'shutdown_request') {
        this.#reply(msg, fromSession, 'shutdown_reply', { status: 'ok', restart: Boolean(msg.content?.restart) });
      }
      return;
    }
    if (msg.channel !== 'shell') return;
    this.#queue.push({ msg, fromSession });
    void this.#pump();
  }

  /** Interrupts the running cell (unless `ignoreInterrupts`); counted either way. */
  interrupt(): void {
    this.interrupts++;
    if (this.ignoreInterrupts || !this.#running) return;
    this.#running.controller.abort(new Interrupted('interrupted'));
  }

  /** Restarts the kernel: the running cell never gets a reply, queued requests are dropped, state is cleared. */
  restart(): void {
    if (this.#gone) return;
    this.restarts++;
    this.#abandon();
    this.state.clear();
    this.executionCount = 0;
    this.#session = randomUUID();
    this.executionState = 'idle';
  }

  /** Kills the kernel process (see `KernelScriptContext.die()`); a running cell never gets a reply. */
  die(opts: DieOptions = {}): void {
    if (this.#gone) return;
    if (opts.restart ?? true) {
      this.#status('restarting', undefined);
      this.restart();
      this.#status('starting', undefined);
      this.#status('idle', undefined);
      return;
    }
    this.#abandon();
    this.#status('dead', undefined);
    this.executionState = 'dead';
    this.#gone = true;
    this.#host.removed(this);
  }

  /** @internal Deleted over REST, or the gateway closed. */
  shutdown(): void {
    this.#abandon();
    this.#gone = true;
    this.executionState = 'dead';
  }

  /** Sends an unsolicited message (or one with `parent` as parent) to the clients. */
  send(
    channel: 'iopub' | 'shell' | 'stdin' | 'control',
    msgType: string,
    content: Record<string, unknown>,
    parent?: JupyterMessage,
  ): void {
    this.#host.deliver(this, this.#message(channel, msgType, content, parent), undefined);
  }

  /** Sends raw bytes or text to every client of this kernel, e.g. a malformed frame. */
  sendRaw(data: string | Uint8Array): void {
    this.#host.deliverRaw(this, data);
  }

  #abandon(): void {
    this.#generation++;
    this.#pumping = false;
    this.#queue.length = 0;
    this.#running?.controller.abort(new Abandoned('abandoned'));
    this.#running = undefined;
  }

  async #pump(): Promise<void> {
    if (this.#pumping) return;
    this.#pumping = true;
    const generation = this.#generation;
    try {
      for (let next = this.#queue.shift(); next; next = this.#queue.shift()) {
        await this.#handle(next.msg, next.fromSession);
        if (this.#generation !== generation || this.#gone) return;
      }
    } finally {
      if (this.#generation === generation) this.#pumping = false;
    }
  }

  async #handle(msg: JupyterMessage, fromSession: string | undefined): Promise<void> {
    const type = msg.header?.msg_type;
    const generation = this.#generation;
    this.#status('busy', msg);
    let failed = false;
    if (type === 'execute_request') {
      failed = await this.#execute(msg, fromSession);
    } else if (type === 'kernel_info_request') {
      this.#reply(msg, fromSession, 'kernel_info_reply', kernelInfo(this.#language));
    } else {
      const fixed = fixedShellReply(type);
      if (fixed) this.#reply(msg, fromSession, fixed.type, fixed.content);
    }
    if (this.#gone || this.#generation !== generation) return;
    this.#status('idle', msg);
    if (failed && msg.content?.stop_on_error !== false) this.#abortQueued();
  }

  /** Runs one cell through the script and answers it; true when it failed (ends the queued cells, unless told not). */
  async #execute(msg: JupyterMessage, fromSession: string | undefined): Promise<boolean> {
    const running = this.#startCell(msg, fromSession);
    const { ctx, stopped, emit } = this.#scriptContext(running);
    let reply: Record<string, unknown>;
    try {
      await this.#script(ctx);
      if (stopped()) return false;
      reply = { status: 'ok', execution_count: ctx.executionCount, user_expressions: {}, payload: [] };
    } catch (error) {
      if (stopped() || error instanceof Abandoned) return false;
      const failed = failedReply(error, ctx.executionCount, this.interruptReply);
      const { raised } = failed;
      if (raised) emit('iopub', 'error', { ename: raised.ename, evalue: raised.evalue, traceback: raised.traceback });
      reply = failed.reply;
    } finally {
      if (this.#running === running) this.#running = undefined;
    }
    this.#reply(msg, fromSession, 'execute_reply', reply);
    return reply.status !== 'ok';
  }

  /** Counts the cell (unless silent), publishes its `execute_input` and makes it the running cell. */
  #startCell(msg: JupyterMessage, fromSession: string | undefined): Running {
    const content = msg.content ?? {};
    const code = String(content.code ?? '');
    const silent = Boolean(content.silent);
    const storeHistory = content.store_history === undefined ? !silent : Boolean(content.store_history);
    this.executed.push(code);
    if (storeHistory && !silent) this.executionCount++;
    if (!silent) this.send('iopub', 'execute_input', { code, execution_count: this.executionCount }, msg);
    const running: Running = { request: msg, controller: new AbortController(), fromSession, stdinWaiter: undefined };
    this.#running = running;
    return running;
  }

  /**
   * What the script gets for the running cell, and the cell's own `emit` (silent once the cell is abandoned) and
   * `stopped` (abandoned: it never gets a reply).
   */
  #scriptContext(running: Running): {
    ctx: KernelScriptContext;
    stopped: () => boolean;
    emit: (channel: Channel, type: string, c: Record<string, unknown>) => void;
  } {
    const msg = running.request;
    const content = msg.content ?? {};
    const count = this.executionCount;
    const signal = running.controller.signal;
    const stopped = () => signal.aborted && signal.reason instanceof Abandoned;
    const emit = (channel: Channel, type: string, c: Record<string, unknown>) => {
      if (!stopped())
        this.#host.deliver(
          this,
          this.#message(channel, type, c, msg),
          channel === 'iopub' ? undefined : running.fromSession,
        );
    };
    const ctx: KernelScriptContext = {
      code: String(content.code ?? ''),
      cellId: typeof msg.metadata?.cellId === 'string' ? msg.metadata.cellId : undefined,
      content,
      executionCount: count,
      state: this.state,
      kernel: this,
      signal,
      stdout: (text) => emit('iopub', 'stream', { name: 'stdout', text }),
      stderr: (text) => emit('iopub', 'stream', { name: 'stderr', text }),
      display: (data, metadata = {}) => emit('iopub', 'display_data', { data, metadata, transient: {} }),
      result: (data, metadata = {}) => emit('iopub', 'execute_result', { data, metadata, execution_count: count }),
      ...cellWaits(running, content, this.#host.clock, emit),
      ignoreInterrupts: () => {
        this.ignoreInterrupts = true;
      },
      die: (opts) => {
        this.die(opts);
        throw new Abandoned('died');
      },
      send: (channel, type, c) => emit(channel, type, c),
      raw: (data) => {
        if (!stopped()) this.#host.deliverRaw(this, data);
      },
    };
    return { ctx, stopped, emit };
  }

  /** ipykernel's stop_on_error: every execute_request already queued is answered `aborted` without running. */
  #abortQueued(): void {
    const queued = this.#queue.splice(0).filter((q) => {
      if (q.msg.header?.msg_type === 'execute_request') return true;
      this.#queue.push(q);
      return false;
    });
    for (const q of queued) {
      this.#status('busy', q.msg);
      this.#reply(q.msg, q.fromSession, 'execute_reply', { status: 'aborted' });
      this.#status('idle', q.msg);
    }
  }

  #status(state: string, parent: JupyterMessage | undefined): void {
    if (state === 'busy' || state === 'idle' || state === 'starting') this.executionState = state;
    const msg = this.#message('iopub', 'status', { execution_state: state }, parent);
    this.#host.deliver(this, msg, undefined);
  }

  #reply(request: JupyterMessage, toSession: string | undefined, type: string, content: Record<string, unknown>): void {
    const channel = request.channel === 'control' ? 'control' : 'shell';
    this.#host.deliver(this, this.#message(channel, type, content, request), toSession);
  }

  #message(
    channel: string,
    msgType: string,
    content: Record<string, unknown>,
    parent?: JupyterMessage,
  ): JupyterMessage {
    return kernelMessage(this.#session, channel, msgType, content, parent);
  }
}
