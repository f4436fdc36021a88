import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findLeaks, kernelPids, leakTeardown, processesMentioning, startTestServer, testGateway } from './index.js';

async function createKernel(gw: { baseUrl: string; token: string }): Promise<string> {
  const res = await fetch(`${gw.baseUrl}/api/kernels`, {
    method: 'POST',
    headers: { Authorization: `token ${gw.token}`, 'Content-Type': 'application/json' },
    body: '{"name":"python3"}',
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

async function waitForPids(id: string): Promise<number[]> {
  for (let i = 0; i < 200; i++) {
    const pids = kernelPids(id);
    if (pids.length > 0) return pids;
    await new Promise((r) => setTimeout(r, 50));
  }
  return [];
}

describe('leak teardown', () => {
  it('finds a kernel left behind, both in the gateway listing and as a process', async () => {
    const gw = testGateway();
    const id = await createKernel(gw);
    try {
      const pids = await waitForPids(id);
      expect(pids.length).toBeGreaterThan(0);
      const leaks = await findLeaks({ gateway: gw, marker: gw.runtimeDir });
      expect(leaks.some((l) => l.kind === 'gateway-kernel' && l.detail.includes(id))).toBe(true);
      expect(leaks.some((l) => l.kind === 'process' && pids.includes(l.pid ?? -1))).toBe(true);
    } finally {
      await fetch(`${gw.baseUrl}/api/kernels/${id}`, {
        method: 'DELETE',
        headers: { Authorization: `token ${gw.token}` },
      });
    }
  });

  it('fails the run when a kernel is left behind, and kills what was left', async () => {
    const base = mkdtempSync(join(testGateway().root, 'leak-proof-'));
    const server = await startTestServer({ root: base });
    const id = await createKernel(server);
    expect((await waitForPids(id)).length).toBeGreaterThan(0);
    await expect(leakTeardown(server, base)).rejects.toThrow(/Leak check failed[\s\S]*kernel/);
    expect(processesMentioning(base)).toEqual([]);
    rmSync(base, { recursive: true, force: true });
  });

  it('passes when everything was shut down', async () => {
    const base = mkdtempSync(join(testGateway().root, 'leak-clean-'));
    const server = await startTestServer({ root: base });
    const id = await createKernel(server);
    await fetch(`${server.baseUrl}/api/kernels/${id}`, {
      method: 'DELETE',
      headers: { Authorization: `token ${server.token}` },
    });
    await expect(leakTeardown(server, base)).resolves.toBeUndefined();
  });
});
