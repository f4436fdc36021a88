import { request as httpRequest } from 'node:http';
import {
  DefaultWebSocket,
  type GatewayAnswer,
  GatewayClient,
  type GatewayRequest,
  GatewayResponseTooLargeError,
  GatewayUnavailableError,
  type WebSocketClass,
} from '@kernelwarden/gateway-client';
import type { ServerInfo } from './info-file.js';
import { listenerOwnership } from './listener.js';

/**
 * Throws `GatewayUnavailableError` unless the server process `pid` itself still listens on `127.0.0.1:port`. Called
 * before every request and socket a ticket makes: if the server has gone and someone else took its port, they get
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

/**
 * One HTTP/1.1 request to the loopback server with `node:http` (already loaded by `ws`), the whole body read before
 * it resolves. What GatewayClient sends through a ticket: Node's `fetch` costs a command ~20 ms to load on first use.
 * A body longer than `init.maxResponseBytes` (by its `Content-Length` or as it arrives) is not read further: the
 * connection is closed and the request rejects with `GatewayResponseTooLargeError`.
 */
export const loopbackRequest: GatewayRequest = (url, init) =>
  new Promise<GatewayAnswer>((resolve, reject) => {
    const headers: Record<string, string | number> = { ...init.headers };
    if (init.body !== undefined) headers['Content-Length'] = Buffer.byteLength(init.body);
    const limit = init.maxResponseBytes;
    const req = httpRequest(url, { method: init.method, headers, signal: init.signal }, (res) => {
      const chunks: Buffer[] = [];
      let received = 0;
      const tooLarge = () => {
        const { origin, pathname } = new URL(url);
        reject(
          new GatewayResponseTooLargeError(
            `Gateway at ${origin} answered ${init.method} ${pathname} with a body larger than ${limit} bytes (maxResponseBytes); it was not read further`,
            { url: origin, request: `${init.method} ${pathname}`, limitBytes: limit ?? 0 },
          ),
        );
        res.destroy();
        req.destroy();
      };
      if (limit !== undefined && Number(res.headers['content-length'] ?? 0) > limit) {
        tooLarge();
        return;
      }
      res.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (limit !== undefined && received > limit) {
          chunks.length = 0;
          tooLarge();
          return;
        }
        chunks.push(chunk);
      });
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, text: async () => text });
      });
    });
    req.on('error', reject);
    req.end(init.body);
  });

/**
 * The masking key of every frame a ticket's WebSocket sends: all zeros, which `ws` takes as "skip masking". Masking
 * keeps a browser's frames from being read as requests by a caching proxy between it and a server; between this
 * process and the server it verified on 127.0.0.1 there is none, and masking each frame byte by byte in JavaScript
 * cost a short command about 2 ms (its cell's code and the script's bootstrap).
 */
function unmasked(mask: Uint8Array): void {
  mask.fill(0);
}

/**
 * The transport of a ticket — `fetch`, a lighter `request` (what GatewayClient uses when given) and the WebSocket
 * class — each checking the listener first.
 */
export function guardedTransport(
  baseUrl: string,
  port: number,
  pid: number,
): { fetch: typeof fetch; request: GatewayRequest; WebSocket: WebSocketClass } {
  const guardedFetch: typeof fetch = (input, init) => {
    try {
      assertServerListening(baseUrl, port, pid);
    } catch (error) {
      return Promise.reject(error);
    }
    return globalThis.fetch(input, init);
  };
  const guardedRequest: GatewayRequest = (url, init) => {
    try {
      assertServerListening(baseUrl, port, pid);
    } catch (error) {
      return Promise.reject(error);
    }
    return loopbackRequest(url, init);
  };
  // `ws`'s WebSocket, loaded when the first socket opens (importing this package does not load it).
  class GuardedWebSocket extends DefaultWebSocket {
    constructor(url: string, protocols?: string | string[], options?: { headers?: Record<string, string> }) {
      assertServerListening(baseUrl, port, pid);
      super(url, protocols, { ...options, generateMask: unmasked });
    }
  }
  return { fetch: guardedFetch, request: guardedRequest, WebSocket: GuardedWebSocket as unknown as WebSocketClass };
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
