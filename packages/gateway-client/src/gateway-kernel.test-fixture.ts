// Test fixture (not exported): a GatewayKernel over a fake gateway whose channels are a scripted kernel.
import { FakeWebSocket, type FetchHook, hookFetch } from '@kernelwarden/testkit';
import type { WebSocketClass } from './gateway-client.js';
import { GatewayKernel, type GatewayKernelStartOptions } from './gateway-kernel.js';
import { type KernelScript, scriptedKernel } from './kernel-script.test-fixture.js';

export const BASE = 'http://127.0.0.1:9999';
const OPEN = 1;

/** A FakeWebSocket whose "server" is a scripted kernel. */
export class KernelSocket extends FakeWebSocket {
  static script: KernelScript = {};
  static failNew = false;
  readonly kernel = scriptedKernel(KernelSocket.script, (frame) =>
    queueMicrotask(() => {
      if (this.readyState === OPEN) this.receive(frame);
    }),
  );

  constructor(url: string | URL, protocols?: string | string[], options?: unknown) {
    super(url, protocols, options);
    if (KernelSocket.failNew) {
      FakeWebSocket.autoOpen = false;
      queueMicrotask(() => this.fail(new Error('connect ECONNREFUSED')));
    }
  }

  override send(data: Parameters<FakeWebSocket['send']>[0]): void {
    super.send(data);
    if (this.readyState === OPEN) this.kernel.handle(data);
  }
}

export const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

export type Route = (
  method: string,
  url: string,
  init: RequestInit | undefined,
) => Response | Promise<Response> | undefined;

export function gatewayFetch(kernelId: string, route: Route = () => undefined): FetchHook {
  return hookFetch((input, init) => {
    const url = String(input);
    const method = init?.method ?? 'GET';
    const routed = route(method, url, init);
    if (routed) return routed;
    if (method === 'POST' && url.endsWith('/api/kernels')) return json({ id: kernelId, name: 'python3' }, 201);
    if (method === 'GET' && url.endsWith(`/api/kernels/${kernelId}`)) return json({ id: kernelId, name: 'python3' });
    if (method === 'DELETE') return new Response(null, { status: 204 });
    return new Response(null, { status: 204 });
  });
}

export function start(extra: Partial<GatewayKernelStartOptions> = {}): Promise<GatewayKernel> {
  return GatewayKernel.start({
    gateway: { baseUrl: BASE, token: 'secret-token', WebSocket: KernelSocket as unknown as WebSocketClass },
    ...extra,
  });
}

/** Lets queued microtasks and one round of I/O callbacks (setImmediate) run. */
export const settleIo = () => new Promise<void>((resolve) => setTimeout(resolve, 5));

export const lastSocket = () => FakeWebSocket.instances.at(-1) as KernelSocket;
export const calls = (hook: FetchHook, method: string, suffix: string) =>
  hook.calls.filter((c) => c.method === method && c.url.endsWith(suffix));

/** Forgets every fake socket and the scripted kernel's settings: each test starts from none. */
export function resetKernelSockets(): void {
  FakeWebSocket.reset();
  KernelSocket.script = {};
  KernelSocket.failNew = false;
}
