import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { GatewayKernel, GatewaySet, KernelDiedError } from '@kernelwarden/gateway-client';
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
import { KernelSession, type KernelStatusEvent } from './index.js';

describe('KernelSession on a GatewaySet of two real jupyter-servers', () => {
  const servers: { server: TestServer; root: string; killed?: boolean }[] = [];
  const made: GatewayKernel[] = [];
  let session: KernelSession<GatewayKernel> | undefined;
  let set: GatewaySet | undefined;

  afterEach(async () => {
    await session?.close();
    session = undefined;
    set?.close();
    await Promise.all(made.splice(0).map((k) => k.shutdown()));
    for (const { server, root, killed } of servers.splice(0)) {
      if (!killed) {
        await leakTeardown(server, root);
        continue;
      }
      const stray = await waitForNoLeaks({ marker: root }, 5000);
      for (const p of processesMentioning(root)) process.kill(p.pid, 'SIGKILL');
      expect(stray).toEqual([]);
    }
  });

  async function server(name: string): Promise<TestServer> {
    const root = mkdtempSync(join(testGateway().root, `session-set-${name}-`));
    const started = await startTestServer({ root });
    servers.push({ server: started, root });
    return started;
  }

  it("answers the next cell on the other gateway, re-bootstrapped with the generation bumped, once the kernel's gateway was SIGKILLed with its kernels", async () => {
    const a = await server('a');
    const b = await server('b');
    set = new GatewaySet(
      [
        { baseUrl: a.baseUrl, token: a.token },
        { baseUrl: b.baseUrl, token: b.token },
      ],
      { healthIntervalMs: 500, healthTimeoutMs: 1000 },
    );
    const gateways = set;
    const events: KernelStatusEvent[] = [];
    session = new KernelSession<GatewayKernel>({
      python: async (ctx) => {
        const kernel = await GatewayKernel.start({ gateway: gateways, signal: ctx.signal, startupTimeoutMs: 90_000 });
        made.push(kernel);
        return kernel;
      },
      bootstrap: async (lease) => {
        const boot = await lease.kernel.execute(`BOOTED_GENERATION = ${lease.generation}`, { silent: true });
        if (boot.status !== 'ok') throw new Error(`bootstrap failed: ${boot.error?.evalue}`);
      },
    });
    session.on('kernel_status', (e) => events.push(e));

    expect((await session.execute('x = 41\nprint(BOOTED_GENERATION)')).stdout).toBe('0\n');
    const first = session.supervisor.lease('python');
    expect(first?.kernel.client.baseUrl).toBe(a.baseUrl);

    const running = session.execute('import time\ntime.sleep(600)').then(
      (r) => r,
      (e: unknown) => e,
    );
    await new Promise((r) => setTimeout(r, 500));
    for (const pid of kernelPids(first?.kernel.id as string)) process.kill(pid, 'SIGKILL');
    process.kill(a.pid, 'SIGKILL');
    (servers[0] as { killed?: boolean }).killed = true;
    const outcome = await running;
    // The cell that ran on the dead gateway settles with the gateway's typed error (not a hang).
    expect(KernelDiedError.isInstance(outcome)).toBe(true);
    expect(outcome).toMatchObject({ code: 'GATEWAY_DOWN', url: a.baseUrl });
    expect(session.status()).toMatchObject({ state: 'ended' });

    // The next cell: a new kernel on b, bootstrapped, generation 1; the dead kernel's state is gone.
    const next = await session.execute('print(BOOTED_GENERATION)\nprint("x" in globals())');
    expect(next).toMatchObject({ status: 'ok', stdout: '1\nFalse\n' });
    const second = session.supervisor.lease('python');
    expect(second?.generation).toBe(1);
    expect(second?.kernel.client.baseUrl).toBe(b.baseUrl);
    expect(events.map((e) => e.status)).toEqual(['started', 'started']);
    expect(events.map((e) => e.generation)).toEqual([0, 1]);
  });
});
