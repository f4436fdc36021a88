// What a kernel's channels socket is configured with: its target, wire format, reconnect policy and handlers.
import type { Clock } from '@kernelwarden/core';
import type { JupyterMessage } from '@kernelwarden/jupyter-protocol';
import type { ProtocolError } from './errors.js';
import type { GatewayClient } from './gateway-client.js';
import type { WebSocketClass } from './gateway-client-options.js';
import type { JournalRead } from './journal-feed.js';
import type { JournalNumber } from './kernel-journal.js';

/** Which wire format to use: `'auto'` offers v1 and falls back to legacy when the server does not pick it. */
export type WireProtocol = 'auto' | 'v1' | 'legacy';

/** Reconnect policy of a kernel's channels socket. */
export interface ReconnectPolicy {
  /** Attempts after a drop before pending work fails; `0` disables reconnecting. @defaultValue 6 */
  attempts: number;
  /** Delay before the first attempt; doubles each time. @defaultValue 100 */
  initialDelayMs: number;
  /** Cap of the delay between attempts. @defaultValue 3000 */
  maxDelayMs: number;
  /**
   * How long one attempt may take to open the socket (a server or proxy that accepts the connection but never
   * answers the upgrade would otherwise hold the reconnect, and every cell waiting on it, for ever); `0` waits
   * without bound. @defaultValue 10000
   */
  attemptTimeoutMs: number;
}

/** Internal options of a `KernelChannel`. */
export interface KernelChannelOptions {
  WebSocket: WebSocketClass;
  url: string;
  /**
   * This client's session id. jupyter_server writes its own messages (`restarting`/`dead` status, rate-limit
   * notices) under it, numbered from 0 by each connection's handler: they are never replayed and their ids repeat
   * across connections, so they are exempt from duplicate dropping.
   */
  sessionId: string;
  headers: Record<string, string>;
  /** What errors name: the gateway's base URL and the kernel id (never the token). */
  where: string;
  protocol: WireProtocol;
  reconnect: ReconnectPolicy;
  /** The largest frame accepted (the socket's `maxPayload` with `ws`); a larger one is a protocol error. */
  maxFrameBytes: number;
  clock: Clock;
  onMessage(msg: JupyterMessage): void;
  onProtocolError(error: ProtocolError): void;
  /** A frame over `maxFrameBytes` was dropped unread (with `ws`, the socket closes and is reopened). */
  onFrameTooLarge(error: ProtocolError): void;
  onReconnecting(attempt: number, delayMs: number, cause: unknown): void;
  onReconnected(): void;
  onLost(error: Error): void;
  /**
   * The kernel's journal on the server (the embedded gateway), when it keeps one: from a drop until the socket can
   * take over again, kernel iopub messages are read from it (`JournalFeed`), every one once, in order.
   */
  journal?: JournalRead | undefined;
  /** The journal lost numbers (retention) before they were read from it. */
  onJournalLost?: ((lost: { from: JournalNumber; to: JournalNumber }) => void) | undefined;
  /**
   * The journal missed kernel iopub messages the socket delivered: the socket's copies were handed on instead, and the
   * output of cells in flight may have a hole.
   */
  onJournalMissed?: (() => void) | undefined;
  /** A read of the journal succeeded: every kernel iopub message up to it was handed on. */
  onJournalResumed?: (() => void) | undefined;
  /** No cell is in flight (the journal hands iopub back to the socket only then). */
  quiet?: (() => boolean) | undefined;
}

/** What `KernelChannel.forKernel` takes besides the kernel and its handlers. */
export interface ChannelSettings {
  protocol: WireProtocol;
  reconnect: ReconnectPolicy;
  maxFrameBytes: number;
  clock: Clock;
  journal?: boolean | undefined;
}

/** The handlers `KernelChannel.forKernel` passes on. */
export type ChannelHandlers = Pick<
  KernelChannelOptions,
  | 'onMessage'
  | 'onProtocolError'
  | 'onFrameTooLarge'
  | 'onReconnecting'
  | 'onReconnected'
  | 'onLost'
  | 'onJournalLost'
  | 'onJournalResumed'
  | 'onJournalMissed'
  | 'quiet'
>;

/** The options of the channels socket of kernel `kernelId` on `client`'s gateway, under `sessionId`. */
export function channelOptions(
  client: GatewayClient,
  kernelId: string,
  sessionId: string,
  opts: ChannelSettings,
  handlers: ChannelHandlers,
): KernelChannelOptions {
  const target = client.channelsTarget(kernelId, sessionId);
  const journal: JournalRead | undefined = opts.journal
    ? (query, signal) => client.kernelJournal(kernelId, query, { signal })
    : undefined;
  return {
    WebSocket: client.WebSocket,
    url: target.url,
    sessionId,
    headers: target.headers,
    where: `kernel ${kernelId} at ${client.baseUrl}`,
    protocol: opts.protocol,
    reconnect: opts.reconnect,
    maxFrameBytes: opts.maxFrameBytes,
    clock: opts.clock,
    journal,
    ...handlers,
  };
}
