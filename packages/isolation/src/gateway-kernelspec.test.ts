import { InvalidOptionsError } from '@kernelwarden/core';
import { describe, expect, it } from 'vitest';
import { IsolationUnavailableError } from './errors.js';
import { prepareIsolatedKernel } from './gateway-kernelspec.js';

const policy = { roots: ['/srv/data'], allowedRoots: [], tempDir: '/tmp' };
const token = 'secret-token-0123456789';

function fakeFetch(status: number, body: unknown, seen: { url?: string; auth?: string } = {}): typeof fetch {
  return (async (url: string, init?: RequestInit) => {
    seen.url = url;
    seen.auth = (init?.headers as Record<string, string> | undefined)?.Authorization;
    return new Response(JSON.stringify(body), { status });
  }) as typeof fetch;
}

describe('prepareIsolatedKernel', () => {
  it('asks the gateway for its kernelspecs with the token header, and reports an unknown name by field', async () => {
    const seen: { url?: string; auth?: string } = {};
    const error = await prepareIsolatedKernel({
      gateway: { baseUrl: 'http://127.0.0.1:9/', token, kernelSpecDir: '/srv/kernels' },
      kernelName: 'julia',
      policy,
      workspace: '/srv/ws',
      fetch: fakeFetch(200, { kernelspecs: { python3: { spec: {} } } }, seen),
    }).catch((e: unknown) => e);
    expect(seen).toEqual({ url: 'http://127.0.0.1:9/api/kernelspecs', auth: `token ${token}` });
    expect(InvalidOptionsError.isInstance(error)).toBe(true);
    expect((error as InvalidOptionsError).path).toBe('kernelName');
  });

  it('turns an HTTP failure or an unreachable gateway into IsolationUnavailableError without the token', async () => {
    const gateway = { baseUrl: 'http://127.0.0.1:9', token, kernelSpecDir: '/srv/kernels' };
    const http = await prepareIsolatedKernel({
      gateway,
      policy,
      workspace: '/srv/ws',
      fetch: fakeFetch(503, {}),
    }).catch((e: unknown) => e);
    expect(http).toMatchObject({ name: 'IsolationUnavailableError', reason: 'base-kernelspec-unavailable' });
    expect((http as Error).message).toContain('HTTP 503');
    const down = await prepareIsolatedKernel({
      gateway,
      policy,
      workspace: '/srv/ws',
      fetch: (() => Promise.reject(new TypeError('fetch failed'))) as typeof fetch,
    }).catch((e: unknown) => e);
    expect(IsolationUnavailableError.isInstance(down)).toBe(true);
    expect((down as Error).cause).toBeInstanceOf(TypeError);
    for (const e of [http, down]) expect((e as Error).message).not.toContain(token);
  });

  it('turns a listing that is not JSON into IsolationUnavailableError', async () => {
    const error = await prepareIsolatedKernel({
      gateway: { baseUrl: 'http://127.0.0.1:9', token, kernelSpecDir: '/srv/kernels' },
      policy,
      workspace: '/srv/ws',
      fetch: (async () => new Response('<html>proxy error</html>', { status: 200 })) as unknown as typeof fetch,
    }).catch((e: unknown) => e);
    expect(IsolationUnavailableError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ reason: 'base-kernelspec-unavailable' });
    expect((error as Error).message).toContain('not JSON');
    expect((error as Error).cause).toBeInstanceOf(SyntaxError);
  });

  it('rejects with the caller reason when aborted', async () => {
    const controller = new AbortController();
    const reason = new Error('stop');
    controller.abort(reason);
    const error = await prepareIsolatedKernel({
      gateway: { baseUrl: 'http://127.0.0.1:9', kernelSpecDir: '/srv/kernels' },
      policy,
      workspace: '/srv/ws',
      signal: controller.signal,
      fetch: ((_url: string, init?: RequestInit) => Promise.reject(init?.signal?.reason)) as typeof fetch,
    }).catch((e: unknown) => e);
    expect(error).toBe(reason);
  });
});
