import type { TypedEmitter } from '@kernelwarden/core';
import { createMessage, type JupyterMessage } from '@kernelwarden/jupyter-protocol';
import { KernelChannel } from './channel.js';
import type { KernelDeathReason, ProtocolError } from './errors.js';
import type { KernelModel } from './gateway-client.js';
import type { ResolvedGatewayKernelOptions } from './gateway-kernel-options.js';
import { Handshake } from './handshake.js';
import { Heartbeat } from './heartbeat.js';
import { InterruptDrain } from './interrupt-drain.js';
import type { GatewayKernelEventMap, KernelStatus } from './kernel-events.js';
import { kernelJournalCapability } from './kernel-journal.js';
import type { StartingKernel } from './kernel-start.js';
import type { LimitDeaths } from './limit-deaths.js';
import { LivenessPoll } from './liveness.js';
import { type MessageTargets, routeMessage } from './message-router.js';
import type { MessageSequence } from './message-sequence.js';
import { PendingCells } from './pending-cells.js';
import { PongPolicy } from './pong-policy.js';
import { RestartRecovery } from './restart-recovery.js';
import type { SendGate } from './send-gate.js';
import { answerInputRequest } from './stdin-reply.js';

/** What the parts of a `GatewayKernel` ask of the handle that owns them. */
export interface KernelHost {
  readonly sessionId: string;
  readonly events: TypedEmitter<GatewayKernelEventMap>;
  readonly sequence: MessageSequence;
  readonly gate: SendGate;
  id(): string;
  alive(): boolean;
  status(): KernelStatus;
  setStatus(status: KernelStatus): void;
  limits(): LimitDeaths;
  /** A message was dropped (a frame too large). */
  dropped(): void;
  checkGone(): Promise<boolean>;
  lost(error: Error): void;
  die(reason: KernelDeathReason, message: string, cause?: unknown): void;
  serverRestarted(state: 'restarting' | 'dead'): void;
  interrupt(): void;
}

/** The modules a `GatewayKernel` is the facade of, wired to each other and to their handle. */
export interface KernelParts {
  channel: KernelChannel;
  handshake: Handshake;
  cells: PendingCells;
  drain: InterruptDrain;
  restarts: RestartRecovery;
  poll: LivenessPoll;
  heartbeat: Heartbeat;
  pong: PongPolicy;
}

/**
 * Builds the parts of the handle of kernel `model`: the channels socket (reading the kernel's journal after a drop
 * when its model offers one), the handshake, pending cells, interrupt drain, restart recovery, liveness poll,
 * heartbeat and pong policy, and the router from messages to them.
 */
export function assembleKernelParts(
  model: KernelModel,
  opts: ResolvedGatewayKernelOptions,
  host: KernelHost,
): KernelParts {
  const { clock } = opts;
  const parts = {} as KernelParts;
  const channel = openChannel(model, opts, host, parts, (msg) => routeMessage(msg, targets));
  const alive = () => host.alive();
  const busy = () => host.alive() && parts.cells.size > 0;
  const handshake = new Handshake({
    clock,
    sessionId: host.sessionId,
    send: (msg) => channel.send(msg),
    retryMs: opts.kernelInfoRetryMs,
    nudgeMs: opts.iopubNudgeMs,
    nudges: opts.iopubNudges,
  });
  const restarts = restartRecovery(opts, host, parts, channel, handshake);
  const cells = new PendingCells({
    clock,
    idleGraceMs: opts.idleGraceMs,
    replyGraceMs: opts.replyGraceMs,
    sequence: host.sequence,
    // Silence means something was lost only while the socket is open, no restart is recovered from, and no message
    // the socket delivered waits for the journal to hand it on.
    socket: {
      received: () => channel.received,
      listening: () => channel.isOpen && !restarts.recovering && !channel.holdingForJournal,
    },
    onGraceSettled: () => {
      if (cells.size === 0 && host.status() === 'busy') host.setStatus('idle');
    },
  });
  const interrupt = () => host.interrupt();
  const drainMs = opts.interruptDrainMs;
  const drain = new InterruptDrain({ clock, drainMs, cells, gate: host.gate, alive, interrupt });
  const poll = new LivenessPoll({
    clock,
    everyMs: opts.livenessPollMs,
    socket: channel,
    busy,
    recovering: () => restarts.recovering,
    check: () => host.checkGone(),
  });
  const heartbeat = new Heartbeat({ clock, silentMs: opts.heartbeatMs, socket: channel, busy });
  const pong = new PongPolicy({
    enabled: opts.stallWorkaround,
    clock,
    socket: channel,
    demand: { handshaking: () => handshake.active, cells: () => cells.values() },
  });
  const targets = messageTargets(host, handshake, cells, channel);
  Object.assign(parts, { channel, handshake, cells, drain, restarts, poll, heartbeat, pong });
  return parts;
}

/**
 * The channels socket of kernel `model` (reading the kernel's journal after a drop when its model offers one), its
 * events told to `host` and to the `parts` (filled in once built); every message goes to `route`.
 */
function openChannel(
  model: KernelModel,
  opts: ResolvedGatewayKernelOptions,
  host: KernelHost,
  parts: KernelParts,
  route: (msg: JupyterMessage) => void,
): KernelChannel {
  /**
   * A message was dropped for breaking the protocol: counted, and reported as `protocol-error`; the cell it answered,
   * when one of this handle's is named by its parent, settles as an error when it completes.
   */
  const protocolError = (error: ProtocolError) => {
    host.dropped();
    const parentId = error.parentMsgId;
    const cell = parentId === undefined ? undefined : parts.cells.get(parentId);
    cell?.markProtocolError(error.message);
    host.events.emit('protocol-error', cell ? { error, cellId: cell.cellId } : { error });
  };
  /**
   * After the socket reopened with cells pending: a `kernel_info_request` on shell, queued behind them. Its reply
   * proves the kernel answered every earlier request, so a cell whose reply is still missing then was lost with the
   * dead socket and settles after `replyGraceMs` (see `PendingCells.probeSent`) instead of waiting for ever.
   */
  const probeAfterReconnect = () => {
    if (!host.alive() || parts.cells.size === 0) return;
    const probe = createMessage('shell', 'kernel_info_request', host.sessionId, {});
    if (parts.cells.probeSent(probe.header.msg_id)) parts.channel.send(probe);
  };
  const journal = opts.resumeFromJournal && kernelJournalCapability(model) !== undefined;
  return KernelChannel.forKernel(
    opts.client,
    model.id,
    host.sessionId,
    { ...opts, journal },
    {
      onMessage: (msg) => {
        route(msg);
        parts.pong.received();
      },
      onProtocolError: (error) => protocolError(error),
      onFrameTooLarge: (error) => {
        host.dropped();
        const cell = parts.cells.lostFrame(error.message);
        host.events.emit('protocol-error', cell ? { error, cellId: cell.cellId } : { error });
      },
      onReconnecting: (attempt, delayMs) => {
        if (attempt === 1) parts.cells.markCrossedReconnect();
        host.events.emit('reconnecting', { attempt, delayMs });
        if (attempt === 1) void host.checkGone();
      },
      onReconnected: () => {
        probeAfterReconnect();
        host.events.emit('reconnected', {});
      },
      onJournalResumed: () => parts.cells.clearCrossedReconnect(),
      quiet: () => parts.cells.size === 0,
      onJournalMissed: () => parts.cells.markAllDropped(),
      onJournalLost: (lost) => {
        parts.cells.markAllDropped();
        host.events.emit('journal-lost', { from: [...lost.from], to: [...lost.to] });
      },
      onLost: (error) => {
        host.events.emit('connection-lost', { error });
        host.lost(error);
      },
    },
  );
}

/** The handle's restart recovery: it reopens `channel` and reruns `handshake` after the server restarted the kernel. */
function restartRecovery(
  opts: ResolvedGatewayKernelOptions,
  host: KernelHost,
  parts: KernelParts,
  channel: KernelChannel,
  handshake: Handshake,
): RestartRecovery {
  const { client } = opts;
  return new RestartRecovery({
    clock: opts.clock,
    client,
    kernelId: () => host.id(),
    restartTimeoutMs: opts.restartTimeoutMs,
    recovery: opts.recovery,
    gate: host.gate,
    cells: { failAll: (error) => parts.cells.failAll(error) },
    reconnect: async (signal) => {
      await channel.reopen(signal);
      await handshake.run(signal);
    },
    alive: () => host.alive(),
    checkGone: () => host.checkGone(),
    giveUp: (cause) =>
      host.die(
        'dead',
        `Kernel ${host.id()} at ${client.baseUrl} did not come back after the server restarted it`,
        cause,
      ),
    ready: () => host.setStatus('idle'),
    oomDeath: () => host.limits().oomDeath(),
  });
}

/** Where `routeMessage` hands each message: the handshake, the pending cells, the handle's status, stdin's answers. */
function messageTargets(
  host: KernelHost,
  handshake: Handshake,
  cells: PendingCells,
  channel: KernelChannel,
): MessageTargets {
  const stdin = {
    sessionId: host.sessionId,
    alive: () => host.alive(),
    send: (msg: JupyterMessage) => channel.send(msg),
  };
  return {
    sessionId: host.sessionId,
    sequence: host.sequence,
    handshake,
    cells,
    ownStatus: (state) => {
      if (host.status() !== 'restarting' && host.alive()) host.setStatus(state);
    },
    serverStatus: (state) => host.serverRestarted(state),
    inputRequest: (cell, msg) => void answerInputRequest(cell, msg, stdin),
  };
}

/** What the start sequence (`startKernel`) drives: the socket and handshake, and the handle's own steps. */
export function startingKernel(
  channel: KernelChannel,
  handshake: Handshake,
  own: Pick<StartingKernel, 'watch' | 'step' | 'stepAhead' | 'ready' | 'shutdown' | 'abandon'>,
): StartingKernel {
  return {
    ...own,
    connect: async (signal) => {
      await channel.open(signal);
      await handshake.run(signal);
    },
    get info() {
      return handshake.info;
    },
  };
}
