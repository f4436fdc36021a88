import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import {
  kernelPids,
  leakTeardown,
  processesMentioning,
  startTestServer,
  type TestServer,
  testGateway,
  waitForNoLeaks,
} from '@kernelwarden/test-env';
import { afterEach, describe, expect, it } from 'vitest';
import { GatewayDownError } from './errors.js';
import { GatewayKernel } from './gateway-kernel.js';
import { GatewaySet } from './gateway-set.js';

describe('GatewaySet over two real jupyter-servers', () => {
  const servers: { server: TestServer; root: string; killed?: boolean }[] = [];

  /** SIGKILLs a server and every process of the kernels it runs, as a machine that died would leave them. */
  function killServer(server: TestServer, kernelIds: string[]): void {
    for (const id of kernelIds) for (const pid of kernelPids(id)) process.kill(pid, 'SIGKILL');
    process.kill(server.pid, 'SIGKILL');
    const entry = servers.find((s) => s.server === server);
    if (entry) entry.killed = true;
  }
  const kernels: GatewayKernel[] = [];
  let set: GatewaySet | undefined;

  afterEach(async () => {
    set?.close();
    await Promise.all(kernels.splice(0).map((k) => k.shutdown()));
    for (const { server, root, killed } of servers.splice(0)) {
      if (!killed) {
        await leakTeardown(server, root);
        continue;
      }
      // A killed server cannot list kernels: nothing of it may be left running.
      const stray = await waitForNoLeaks({ marker: root }, 5000);
      for (const p of processesMentioning(root)) process.kill(p.pid, 'SIGKILL');
      expect(stray).toEqual([]);
    }
  });

  async function server(name: string): Promise<TestServer> {
    const root = mkdtempSync(join(testGateway().root, `set-${name}-`));
    const started = await startTestServer({ root });
    servers.push({ server: started, root });
    return started;
  }

  it('spreads kernels over both servers; when one is SIGKILLed with its kernels, its running cell settles within seconds with GatewayDownError naming it, and new kernels go to the other', async () => {
    const a = await server('a');
    const b = await server('b');
    set = new GatewaySet(
      [
        { baseUrl: a.baseUrl, token: a.token },
        { baseUrl: b.baseUrl, token: b.token },
      ],
      { healthIntervalMs: 500, healthTimeoutMs: 1000 },
    );
    const onA = await GatewayKernel.start({ gateway: set, startupTimeoutMs: 90_000 });
    kernels.push(onA);
    const onB = await GatewayKernel.start({ gateway: set, startupTimeoutMs: 90_000 });
    kernels.push(onB);
    expect([onA.client.baseUrl, onB.client.baseUrl]).toEqual([a.baseUrl, b.baseUrl]);
    expect((await onA.execute('print("on a")')).stdout).toBe('on a\n');

    const running = onA.execute('import time\nprint("started", flush=True)\ntime.sleep(600)', {
      onOutput: () => {},
    });
    const settled = running.then(
      () => undefined,
      (e: unknown) => e,
    );
    await new Promise((r) => setTimeout(r, 500));
    killServer(a, [onA.id]);
    const killedAt = Date.now();
    const error = await settled;
    const tookMs = Date.now() - killedAt;
    expect(GatewayDownError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ code: 'GATEWAY_DOWN', url: a.baseUrl, kernelId: onA.id });
    expect((error as Error).message).toContain(a.baseUrl);
    // Two failed checks 500 ms apart: well within seconds (a generous bound for a loaded machine).
    expect(tookMs).toBeLessThan(20_000);
    expect(set.health().map((h) => h.healthy)).toEqual([false, true]);

    const next = await GatewayKernel.start({ gateway: set, startupTimeoutMs: 90_000 });
    kernels.push(next);
    expect(next.client.baseUrl).toBe(b.baseUrl);
    expect((await next.execute('print(6 * 7)')).stdout).toBe('42\n');
    expect((await onB.execute('print("b still")')).stdout).toBe('b still\n');
  });
});
