import {
  DefaultWebSocket,
  GatewayClient,
  GatewayUnavailableError,
  type WebSocketClass,
} from '@kernelwarden/gateway-client';
import type { ServerInfo } from './info-file.js';
import { listenerOwnership } from './listener.js';

/**
 * Throws `GatewayUnavailableError` unless the server process `pid` itself still listens on `127.0.0.1:port`. Called
 * before every request and socket a lease makes: if the server has gone and someone else took its port, they get
 * nothing — no token, no code.
 */
export function assertServerListening(baseUrl: string, port: number, pid: number): void {
  const owner = listenerOwnership(port, pid);
  if (owner === 'ours' || owner === 'unknown') return;
  throw new GatewayUnavailableError(
    owner === 'foreign'
      ? `The local gateway at ${baseUrl} is gone and another process listens on its port; nothing was sent to it`
      : `The local gateway at ${baseUrl} is not listening (its server stopped)`,
    { url: baseUrl },
  );
}

/** The fetch and WebSocket class of a lease: the usual ones, each checking the listener first. */
export function guardedTransport(
  baseUrl: string,
  port: number,
  pid: number,
): { fetch: typeof fetch; WebSocket: WebSocketClass } {
  const guardedFetch: typeof fetch = (input, init) => {
    try {
      assertServerListening(baseUrl, port, pid);
    } catch (error) {
      return Promise.reject(error);
    }
    return globalThis.fetch(input, init);
  };
  // `ws`'s WebSocket, loaded when the first socket opens (importing this package does not load it).
  class GuardedWebSocket extends DefaultWebSocket {
    constructor(url: string, protocols?: string | string[], options?: { headers?: Record<string, string> }) {
      assertServerListening(baseUrl, port, pid);
      super(url, protocols, options);
    }
  }
  return { fetch: guardedFetch, WebSocket: GuardedWebSocket as unknown as WebSocketClass };
}

/**
 * A `GatewayClient` of the recorded server over the guarded transport, for the requests LocalGateway makes itself
 * once the server is verified (reaping orphan kernels, `status()`).
 */
export function serverClient(info: ServerInfo, requestTimeoutMs: number): GatewayClient {
  return new GatewayClient({
    baseUrl: info.baseUrl,
    token: info.token,
    requestTimeoutMs,
    ...guardedTransport(info.baseUrl, info.port, info.server.pid),
  });
}
