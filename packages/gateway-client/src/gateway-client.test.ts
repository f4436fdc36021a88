import { InvalidOptionsError, isTimeoutError } from '@kernelwarden/core';
import { FakeGateway, hookFetch } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { GatewayRequestError, GatewayUnavailableError, ProtocolError } from './errors.js';
import { GatewayClient } from './gateway-client.js';
import { GatewayKernel } from './gateway-kernel.js';

const BASE = 'http://127.0.0.1:9999';

describe('GatewayClient', () => {
  it('sends the token as an Authorization header and validates answers', async () => {
    using hook = hookFetch(() => new Response(JSON.stringify([{ id: 'a', name: 'python3' }]), { status: 200 }));
    const client = new GatewayClient({ baseUrl: `${BASE}/`, token: 'tok-1' });
    await expect(client.listKernels()).resolves.toEqual([{ id: 'a', name: 'python3' }]);
    expect(hook.calls[0]?.url).toBe(`${BASE}/api/kernels`);
    expect(new Headers(hook.calls[0]?.init?.headers).get('authorization')).toBe('token tok-1');
  });

  it('throws ProtocolError for an answer of the wrong shape', async () => {
    using _hook = hookFetch(() => new Response(JSON.stringify({ kernels: [] }), { status: 200 }));
    const error = await new GatewayClient({ baseUrl: BASE }).listKernels().catch((e: unknown) => e);
    expect(ProtocolError.isInstance(error)).toBe(true);
  });

  it('rejects with a TimeoutError naming the URL when a request outlives requestTimeoutMs, aborting it', async () => {
    let aborted = false;
    using _hook = hookFetch(
      (_input, init) =>
        new Promise<Response>((_, reject) =>
          init?.signal?.addEventListener('abort', () => {
            aborted = true;
            reject(init.signal?.reason);
          }),
        ),
    );
    const error = await new GatewayClient({ baseUrl: BASE, requestTimeoutMs: 20 })
      .kernelSpecs()
      .catch((e: unknown) => e);
    expect(isTimeoutError(error)).toBe(true);
    expect((error as Error).message).toContain(BASE);
    expect(aborted).toBe(true);
  });

  it('rejects with the caller reason when the signal aborts', async () => {
    using _hook = hookFetch(
      (_input, init) =>
        new Promise<Response>((_, reject) => init?.signal?.addEventListener('abort', () => reject(new Error('x')))),
    );
    const controller = new AbortController();
    const pending = new GatewayClient({ baseUrl: BASE }).listKernels({ signal: controller.signal });
    controller.abort(new Error('stop now'));
    await expect(pending).rejects.toThrow('stop now');
  });

  it('wraps a thrown fetch in GatewayUnavailableError with the cause kept', async () => {
    const cause = new TypeError('fetch failed');
    using _hook = hookFetch(() => Promise.reject(cause));
    const error = await new GatewayClient({ baseUrl: BASE, token: 'tok-2' }).listKernels().catch((e: unknown) => e);
    expect(GatewayUnavailableError.isInstance(error)).toBe(true);
    expect((error as Error).cause).toBe(cause);
    expect((error as Error).message).toContain(BASE);
    expect((error as Error).message).not.toContain('tok-2');
  });

  it('answers getKernel 404 with undefined and other failures with GatewayRequestError', async () => {
    using _hook = hookFetch((input) =>
      String(input).endsWith('/gone') ? new Response('', { status: 404 }) : new Response('boom', { status: 500 }),
    );
    const client = new GatewayClient({ baseUrl: BASE });
    await expect(client.getKernel('gone')).resolves.toBeUndefined();
    const error = await client.interruptKernel('other').catch((e: unknown) => e);
    expect(GatewayRequestError.isInstance(error)).toBe(true);
    expect((error as GatewayRequestError).status).toBe(500);
  });

  it("sums up a Jupyter error body (message and the traceback's last line) in a failed create", async () => {
    const body = JSON.stringify({
      message: 'Unhandled error',
      reason: null,
      traceback:
        'Traceback (most recent call last):\n  File "/usr/lib/python3/dist-packages/tornado/web.py", line 1735\n' +
        "FileNotFoundError: [Errno 2] No such file or directory: '/opt/missing/R'\n",
    });
    using _hook = hookFetch(() => new Response(body, { status: 500 }));
    const error = await new GatewayClient({ baseUrl: BASE }).createKernel({ name: 'ir' }).catch((e: unknown) => e);
    expect((error as Error).message).toBe(
      `Failed to create kernel "ir" on gateway ${BASE}: HTTP 500: Unhandled error — FileNotFoundError: [Errno 2] No such file or directory: '/opt/missing/R'`,
    );
  });

  it('tells ownership about created and deleted kernels, the chosen id before the create is sent', async () => {
    await using gw = await FakeGateway.start();
    const log: string[] = [];
    const client = new GatewayClient({
      baseUrl: gw.baseUrl,
      token: gw.token,
      ownership: {
        creating: (id) => log.push(`creating ${id}`),
        notCreated: (id) => log.push(`notCreated ${id}`),
        created: (id) => log.push(`created ${id}`),
        deleted: (id) => log.push(`deleted ${id}`),
      },
    });
    const model = await client.createKernel({ name: 'python3' });
    await client.deleteKernel(model.id);
    // This server ignores the chosen id (as jupyter-server 1.x does): the chosen id's record goes, the real one stays.
    const create = gw.requests.find((r) => r.route === 'create');
    const chosen = (create?.body as { kernel_id?: string } | undefined)?.kernel_id;
    expect(chosen).not.toBe(model.id);
    expect(log).toEqual([`creating ${chosen}`, `notCreated ${chosen}`, `created ${model.id}`, `deleted ${model.id}`]);
  });

  it('rejects invalid options naming the field', () => {
    expect(() => new GatewayClient({ baseUrl: BASE, requestTimeoutMs: -5 })).toThrow(InvalidOptionsError);
    try {
      new GatewayClient({ baseUrl: 'not a url' });
    } catch (error) {
      expect((error as InvalidOptionsError).path).toBe('baseUrl');
    }
  });
});

describe('wire format negotiation', () => {
  it("falls back to legacy on a server that does not offer v1, and 'v1' alone then fails", async () => {
    await using gw = await FakeGateway.start({ wireFormats: ['legacy'] });
    const gateway = { baseUrl: gw.baseUrl, token: gw.token };
    await using kernel = await GatewayKernel.start({ gateway });
    expect(kernel.protocol).toBe('legacy');
    expect((await kernel.execute("print('hi')")).stdout).toBe('hi\n');
    const error = await GatewayKernel.start({ gateway, protocol: 'v1' }).catch((e: unknown) => e);
    expect(GatewayUnavailableError.isInstance(error)).toBe(true);
    expect(gw.kernels.size).toBe(1);
  });
});
