import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { GatewayClient, GatewayKernel } from '@kernelwarden/gateway-client';
import { testGateway } from '@kernelwarden/test-env';
import { afterEach, describe, expect, it } from 'vitest';
import { KernelSession, type KernelStatusEvent, type SlotFactoryContext } from './index.js';

/** Environment names map to the real server's kernelspecs: 'python3' (default) and 'ir'. */
function gatewayFactory(made: GatewayKernel[]) {
  const { baseUrl, token } = testGateway();
  return async (ctx: SlotFactoryContext) => {
    const kernel = await GatewayKernel.start({
      gateway: { baseUrl, token },
      kernelName: ctx.env ?? 'python3',
      ...(ctx.cwd !== undefined ? { cwd: ctx.cwd } : {}),
      signal: ctx.signal,
      startupTimeoutMs: 90_000,
    });
    made.push(kernel);
    return kernel;
  };
}

async function listedIds(): Promise<string[]> {
  const { baseUrl, token } = testGateway();
  const client = new GatewayClient({ baseUrl, token });
  return (await client.listKernels()).map((k) => k.id);
}

describe('KernelSession over GatewayKernel on the real jupyter-server', () => {
  let session: KernelSession<GatewayKernel> | undefined;
  const made: GatewayKernel[] = [];

  afterEach(async () => {
    await session?.close();
    session = undefined;
    // Belt and braces: a failing test must not leak a kernel past the teardown.
    await Promise.all(made.splice(0).map((k) => k.shutdown()));
  });

  it('executes, stops (the kernel leaves the gateway), starts, switches kernelspec, and runs a background cell alongside a main cell', async () => {
    const workspace = mkdtempSync(join(testGateway().root, 'supervisor-session-'));
    const events: KernelStatusEvent[] = [];
    session = new KernelSession<GatewayKernel>({ python: gatewayFactory(made), cwd: workspace });
    session.on('kernel_status', (e) => events.push(e));

    const first = await session.execute('import os\nprint(6 * 7, os.getcwd())', { cellId: 'c1' });
    expect(first).toMatchObject({ status: 'ok', cellId: 'c1' });
    expect(first.stdout).toBe(`42 ${workspace}\n`);
    const firstKernel = session.supervisor.lease('python')!.kernel;
    expect(await listedIds()).toContain(firstKernel.id);

    await session.stop();
    expect(session.status()).toMatchObject({ state: 'stopped', cancelled: true });
    expect(await listedIds()).not.toContain(firstKernel.id);

    await session.start();
    const second = session.supervisor.lease('python')!;
    expect(second.generation).toBe(1);
    expect(second.kernel.id).not.toBe(firstKernel.id);
    expect((await session.execute('print("again")')).stdout).toBe('again\n');

    // Background cell while a main cell runs: the main cell waits for a file only the background cell writes.
    const marker = join(workspace, 'from-background');
    const main = session.execute(
      [
        'import os, time',
        'deadline = time.time() + 60',
        `while not os.path.exists(${JSON.stringify(marker)}) and time.time() < deadline:`,
        '    time.sleep(0.05)',
        `print('main saw background' if os.path.exists(${JSON.stringify(marker)}) else 'main timed out')`,
      ].join('\n'),
    );
    const { execId } = session.runBackground(
      `open(${JSON.stringify(marker)}, 'w').write('x')\nprint('background done')`,
    );
    const peek = await session.waitBackground(execId);
    expect(peek).toMatchObject({ done: true, error: null, status: 'done' });
    expect(peek.stdout).toBe('background done\n');
    expect((await main).stdout).toBe('main saw background\n');
    expect(session.supervisor.lease('python')).toBe(second);

    await session.setEnv('ir');
    const rLease = session.supervisor.lease('python')!;
    expect(rLease.generation).toBe(2);
    expect((await session.execute('cat(40 + 2)')).stdout).toBe('42');
    const listed = await listedIds();
    expect(listed).toContain(rLease.kernel.id);
    expect(listed).not.toContain(second.kernel.id);

    await session.setEnv('python3');
    expect((await session.execute('print(1 + 1)')).stdout).toBe('2\n');
    expect(session.status()).toMatchObject({ env: 'python3', generation: 3 });

    await session.close();
    const after = await listedIds();
    for (const kernel of made) expect(after).not.toContain(kernel.id);
    expect(events.map((e) => e.status)).toEqual([
      'started',
      'stopped',
      'started',
      'env_changed',
      'env_changed',
      'ended',
    ]);
  });

  it('spares: ensure hands over a started kernel, the spares refill, and close() shuts spare kernels down too', async () => {
    session = new KernelSession<GatewayKernel>({ python: gatewayFactory(made), spares: { size: 1 } });
    const sup = session.supervisor;
    // Wait for the spare to be ready (its start is the slow part the spares take off the critical path).
    await sup.sparesReady('python', '');
    const spare = made[0]!;
    const before = made.length;
    const result = await sup.acquire('python', '', () => {
      throw new Error('the cold factory must not run');
    });
    expect(result.outcome).toBe('spare');
    expect(result.lease.kernel).toBe(spare);
    expect(made.length).toBe(before); // handed over without starting a kernel
    await sup.sparesReady('python', '');
    expect(made.length).toBe(before + 1);
    expect((await session.execute('print("spare")')).stdout).toBe('spare\n');

    await session.close();
    const after = await listedIds();
    for (const kernel of made) expect(after).not.toContain(kernel.id);
  });
});
