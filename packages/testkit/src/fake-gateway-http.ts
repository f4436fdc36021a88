import type { IncomingMessage } from 'node:http';
import type { RawData } from 'ws';
import type { FakeGatewayRoute } from './fake-gateway-types.js';

const KERNEL_PATH = /^\/api\/kernels\/([^/]+)(?:\/(interrupt|restart|channels))?\/?$/;

/** The route a request names, and the kernel it is about. */
export function routeOf(method: string, path: string): { route: FakeGatewayRoute; kernelId?: string } {
  if (path === '/api' || path === '/api/') return { route: method === 'GET' ? 'api' : 'unknown' };
  if (/^\/api\/kernelspecs\/?$/.test(path)) return { route: method === 'GET' ? 'kernelspecs' : 'unknown' };
  if (/^\/api\/kernels\/?$/.test(path)) {
    return { route: method === 'GET' ? 'list' : method === 'POST' ? 'create' : 'unknown' };
  }
  const m = KERNEL_PATH.exec(path);
  if (!m) return { route: 'unknown' };
  const kernelId = decodeURIComponent(m[1] as string);
  const action = m[2];
  if (action === 'channels') return { route: method === 'GET' ? 'channels' : 'unknown', kernelId };
  if (action === 'interrupt' || action === 'restart')
    return { route: method === 'POST' ? action : 'unknown', kernelId };
  return { route: method === 'GET' ? 'get' : method === 'DELETE' ? 'delete' : 'unknown', kernelId };
}

/** The query parameters of a request, without the token. */
export function queryOf(url: URL): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of url.searchParams) if (k !== 'token') out[k] = v;
  return out;
}

/** The whole body of a request. */
export function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', () => resolve(Buffer.concat(chunks)));
  });
}

/** A frame's bytes, however ws delivered them. */
export function toBytes(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}
