import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { FakeGateway } from './fake-gateway.js';

async function create(gw: FakeGateway, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${gw.baseUrl}/api/kernels`, {
    method: 'POST',
    headers: { Authorization: `token ${gw.token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

describe("FakeGateway({ flavor: 'enterprise-gateway' })", () => {
  it('makes KERNEL_ID the kernel id, fills KERNEL_USERNAME, and passes only KERNEL_* and clientEnvs names', async () => {
    await using gw = await FakeGateway.start({ flavor: 'enterprise-gateway', clientEnvs: ['TZ'] });
    const id = randomUUID();
    const answer = await create(gw, { name: 'python3', env: { KERNEL_ID: id, KERNEL_X: '1', TZ: 'UTC', PATH: '/x' } });
    expect(answer).toMatchObject({ status: 201, body: { id } });
    expect(gw.kernel(id).launchEnv).toEqual({
      KERNEL_ID: id,
      KERNEL_X: '1',
      TZ: 'UTC',
      KERNEL_USERNAME: 'enterprise-gateway',
    });
    const bad = await create(gw, { name: 'python3', env: { KERNEL_ID: 'not-a-uuid' } });
    expect(bad.status).toBe(500);
  });

  it("refuses env values as EG does (400 naming the variable), and ignores a refused value's name it filters out", async () => {
    await using gw = await FakeGateway.start({ flavor: 'enterprise-gateway' });
    for (const value of ['a$b', 'a`b', 'a\nb', 'a\rb', 'a\0b', 'x'.repeat(4097)]) {
      const answer = await create(gw, { name: 'python3', env: { KERNEL_V: value } });
      expect(answer.status).toBe(400);
      expect(String(answer.body.message)).toContain("'KERNEL_V'");
    }
    expect((await create(gw, { name: 'python3', env: { OTHER: 'a$b' } })).status).toBe(201);
  });

  it('blocks the create for launchDelayMs, counts launches toward maxKernels (403 Resource Limit), and times a launch out with 500', async () => {
    await using gw = await FakeGateway.start({ flavor: 'enterprise-gateway', launchDelayMs: 300, maxKernels: 1 });
    const first = create(gw, { name: 'python3', env: {} });
    await new Promise((r) => setTimeout(r, 50));
    expect(gw.kernels.size).toBe(0);
    const refused = await create(gw, { name: 'python3', env: {} });
    expect(refused).toMatchObject({ status: 403, body: { message: 'Resource Limit' } });
    expect((await first).status).toBe(201);

    await using slow = await FakeGateway.start({ flavor: 'enterprise-gateway', launchDelayMs: 5000 });
    const timedOut = await create(slow, { name: 'python3', env: { KERNEL_LAUNCH_TIMEOUT: '0.2' } });
    expect(timedOut.status).toBe(500);
    expect(String(timedOut.body.reason)).toMatch(/launch timeout due to: Waited too long \(0\.2s\)/);
    expect(slow.kernels.size).toBe(0);
  });
});
