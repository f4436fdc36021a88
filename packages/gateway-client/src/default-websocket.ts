import { lazyModule } from '@kernelwarden/core';
import type * as Ws from 'ws';

/** A WHATWG-style WebSocket class (the `ws` package's class, the global one, or a test fake). */
export type WebSocketClass = new (
  url: string,
  protocols?: string | string[],
  options?: { headers?: Record<string, string> },
) => WebSocket;

// The literal require() is what a bundler inlines for an application bundled into one file (see lazyModule).
const wsLibrary = lazyModule<typeof Ws>('ws', import.meta.url, () => require('ws'));

let linked = false;

/** The `ws` package's WebSocket class, loaded now if it was not; the default class's prototype then extends it. */
function wsWebSocket(): typeof Ws.WebSocket {
  const Impl = wsLibrary().WebSocket;
  if (!linked) {
    Object.setPrototypeOf(DefaultWebSocket.prototype, Impl.prototype);
    Object.setPrototypeOf(DefaultWebSocket, Impl);
    linked = true;
  }
  return Impl;
}

/**
 * The `ws` package's WebSocket, loaded when the first socket is constructed rather than when this package is
 * imported (loading `ws` costs tens of milliseconds). Instances are `ws` WebSockets (they ping, pong and send
 * headers); a subclass of this one — `LocalGateway`'s guarded class — works like a subclass of `ws`'s.
 *
 * It is `GatewayClient`'s default `WebSocket`; pass it, or a subclass of it, where a `ws` class is wanted without
 * loading `ws` up front.
 */
export class DefaultWebSocket {
  static readonly CONNECTING = 0;
  static readonly OPEN = 1;
  static readonly CLOSING = 2;
  static readonly CLOSED = 3;

  constructor(url: string, protocols?: string | string[], options?: Ws.ClientOptions) {
    const Impl = wsWebSocket();
    // biome-ignore lint/correctness/noConstructorReturn: the instance is the ws socket itself, of this (sub)class
    return Reflect.construct(Impl, [url, protocols, options], new.target) as DefaultWebSocket;
  }
}

/**
 * True when sockets of class `Impl` are `ws` WebSockets (this package's default class, a subclass of it, or a class
 * derived from `ws`'s own): they take connect headers and can ping and pong.
 */
export function isWsClass(Impl: WebSocketClass): boolean {
  const derives = (Base: object) =>
    (Impl as unknown) === Base ||
    Object.prototype.isPrototypeOf.call((Base as { prototype: object }).prototype, Impl.prototype);
  return derives(DefaultWebSocket) || derives(wsWebSocket());
}

/** The default class as the `WebSocketClass` type the options use. */
export const defaultWebSocketClass = DefaultWebSocket as unknown as WebSocketClass;
