import { describe, expect, it } from 'vitest';
import { hookFetch } from './hook-fetch.js';

describe('hookFetch', () => {
  it('answers fetch with the handler and records url and method', async () => {
    const before = globalThis.fetch;
    {
      using hook = hookFetch((input) =>
        String(input).endsWith('/api/kernels')
          ? Response.json({ id: 'k1' }, { status: 201 })
          : new Response(null, { status: 404 }),
      );
      const created = await fetch('http://127.0.0.1:1/api/kernels', { method: 'post' });
      expect(created.status).toBe(201);
      expect(await created.json()).toEqual({ id: 'k1' });
      expect((await fetch(new Request('http://127.0.0.1:1/x', { method: 'DELETE' }))).status).toBe(404);
      expect(hook.calls.map((c) => [c.method, c.url])).toEqual([
        ['POST', 'http://127.0.0.1:1/api/kernels'],
        ['DELETE', 'http://127.0.0.1:1/x'],
      ]);
    }
    expect(globalThis.fetch).toBe(before);
  });

  it('restores the previous fetch even when hooks nest, and restore is idempotent', () => {
    const before = globalThis.fetch;
    const outer = hookFetch(() => new Response('outer'));
    const afterOuter = globalThis.fetch;
    const inner = hookFetch(() => new Response('inner'));
    inner.restore();
    inner.restore();
    expect(globalThis.fetch).toBe(afterOuter);
    outer[Symbol.dispose]();
    expect(globalThis.fetch).toBe(before);
  });

  it('passes the original fetch to the handler for pass-through', async () => {
    const before = globalThis.fetch;
    let seen: unknown;
    using _hook = hookFetch((_input, _init, original) => {
      seen = original;
      return new Response('ok');
    });
    await fetch('http://127.0.0.1:1/');
    expect(seen).toBe(before);
  });
});
