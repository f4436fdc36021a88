// Opening a kernel's channels WebSocket (negotiating the wire format), and what a socket of the `ws` library can do
// beyond the WHATWG API: ping, unsolicited pong, terminate.
import type { Clock } from '@kernelwarden/core';
import { V1_SUBPROTOCOL } from '@kernelwarden/jupyter-protocol';
import { GatewayUnavailableError } from './errors.js';
import type { WebSocketClass } from './gateway-client-options.js';
import { connectError, errorOf } from './socket-errors.js';

/** Where a channels socket connects, and with what. */
export interface SocketTarget {
  readonly WebSocket: WebSocketClass;
  readonly url: string;
  readonly headers: Record<string, string>;
  /** What errors name: the gateway's base URL and the kernel id (never the token). */
  readonly where: string;
  readonly maxFrameBytes: number;
  readonly clock: Clock;
}

/**
 * Opens a socket and hands it to `opened` synchronously in its `open` event, with the format the server took, so
 * frames the server sends right after the upgrade (a replay) are not missed. With `timeoutMs` (> 0), a socket not
 * open by then is closed and the attempt fails with `GatewayUnavailableError`.
 */
export function openSocket(
  target: SocketTarget,
  format: 'v1' | 'legacy',
  opened: (socket: WebSocket, format: 'v1' | 'legacy') => void,
  signal?: AbortSignal,
  timeoutMs = 0,
): Promise<WebSocket> {
  const { WebSocket: Impl, url, headers, where } = target;
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise<WebSocket>((resolve, reject) => {
    let socket: WebSocket;
    try {
      socket = new Impl(url, format === 'v1' ? [V1_SUBPROTOCOL] : [], {
        headers,
        perMessageDeflate: false,
        maxPayload: target.maxFrameBytes,
      } as { headers: Record<string, string> });
    } catch (cause) {
      reject(new GatewayUnavailableError(`Could not open the channels WebSocket of ${where}`, { url: where, cause }));
      return;
    }
    if ((socket as { binaryType?: string }).binaryType !== 'nodebuffer') socket.binaryType = 'arraybuffer';
    let settled = false;
    const timer =
      timeoutMs > 0
        ? target.clock.setTimer(
            () =>
              finish(
                new GatewayUnavailableError(
                  `The channels WebSocket of ${where} did not open within ${timeoutMs} ms (reconnect.attemptTimeoutMs)`,
                  { url: where },
                ),
              ),
            timeoutMs,
          )
        : undefined;
    const finish = (error: unknown) => {
      if (settled) return;
      settled = true;
      timer?.cancel();
      signal?.removeEventListener('abort', onAbort);
      if (error === undefined) {
        detach(socket);
        // A server that accepted the upgrade without picking v1 speaks legacy.
        opened(socket, format === 'v1' && socket.protocol === '' ? 'legacy' : format);
        resolve(socket);
        return;
      }
      detach(socket);
      try {
        socket.close();
      } catch {
        // never opened
      }
      reject(error);
    };
    const onAbort = () => finish(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    socket.onopen = () => finish(undefined);
    socket.onerror = (event: Event) => finish(connectError(errorOf(event), where));
    socket.onclose = (event: CloseEvent) =>
      finish(
        new GatewayUnavailableError(
          `The channels WebSocket of ${where} closed before it opened (code ${event?.code ?? 'unknown'})`,
          { url: where },
        ),
      );
  });
}

/**
 * A ping of `socket` that never throws, when it can ping (the `ws` library's can; `onPong` then hears its pongs), else
 * undefined.
 */
export function socketPinger(socket: WebSocket, onPong: () => void): (() => void) | undefined {
  const { ping, on } = socket as unknown as {
    ping?: () => void;
    on?: (event: string, listener: () => void) => void;
  };
  if (typeof ping !== 'function' || typeof on !== 'function') return undefined;
  const pinger = () => {
    try {
      ping.call(socket);
    } catch {
      // closing: the next check drops it anyway
    }
  };
  on.call(socket, 'pong', onPong);
  return pinger;
}

/** An unsolicited pong on `socket` that never throws, when it can send one (the `ws` library's can), else undefined. */
export function socketPonger(socket: WebSocket): (() => void) | undefined {
  const pong = (socket as unknown as { pong?: () => void }).pong;
  return typeof pong === 'function'
    ? () => {
        try {
          pong.call(socket);
        } catch {
          // socket closing: nothing to acknowledge
        }
      }
    : undefined;
}

/** Detaches and closes `socket`; a `hung` one is terminated where it can be (it would never finish a closing handshake). */
export function discardSocket(socket: WebSocket, hung: boolean): void {
  detach(socket);
  const terminate = (socket as unknown as { terminate?: () => void }).terminate;
  try {
    if (hung && typeof terminate === 'function') terminate.call(socket);
    else socket.close();
  } catch {
    // already closed
  }
}

/** Removes the socket's handlers (its errors are swallowed from then on). */
export function detach(socket: WebSocket): void {
  socket.onopen = null;
  socket.onmessage = null;
  socket.onclose = null;
  socket.onerror = () => {};
}
