import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ExecuteResult } from '@kernelwarden/core';
import { kernelMarker, processesCarrying } from '@kernelwarden/core/os';
import { GatewayKernel } from '@kernelwarden/gateway-client';
import { LocalGateway } from '@kernelwarden/local-gateway';
import { KernelSession } from '@kernelwarden/supervisor';
import { kernelPids, startTestServer, testGateway } from '@kernelwarden/test-env';
import { CellTimeoutError, createWatchdog } from '@kernelwarden/watchdog';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIRKernel } from './ir-kernel.js';
import { createRSlot } from './r-slot.js';

const PNG_SIGNATURE = 'iVBORw0KGgo';

async function waitForPids(id: string): Promise<number[]> {
  for (let i = 0; i < 100; i++) {
    const pids = kernelPids(id);
    if (pids.length > 0) return pids;
    await new Promise((r) => setTimeout(r, 50));
  }
  return [];
}

describe('startIRKernel on a real IRkernel', () => {
  let kernel: GatewayKernel;
  beforeAll(async () => {
    kernel = await startIRKernel({ gateway: testGateway(), startupTimeoutMs: 60_000 });
  });
  afterAll(async () => {
    const { confirmed } = await kernel.shutdown();
    expect(confirmed).toBe(true);
    expect(kernelPids(kernel.id)).toEqual([]);
  });

  it('is a GatewayKernel on the ir kernelspec', () => {
    expect(kernel).toBeInstanceOf(GatewayKernel);
    expect(kernel.isAlive()).toBe(true);
  });

  it('returns text, printed data frames, errors with their message, PNG plots, and keeps variables', async () => {
    const cat = await kernel.execute('cat(1+1)');
    expect(cat).toMatchObject({ status: 'ok', stdout: '2' });

    const frame = await kernel.execute('print(head(mtcars))');
    expect(frame.status).toBe('ok');
    expect(frame.stdout).toContain('Mazda RX4');
    expect(frame.stdout).toContain('mpg');

    const failed = await kernel.execute('stop("bad")');
    expect(failed.status).toBe('error');
    expect(failed.error?.evalue).toContain('bad');

    const plot = await kernel.execute('plot(1:10)');
    expect(plot.status).toBe('ok');
    const png = plot.outputs.find((o) => o.type === 'display_data' && typeof o.data['image/png'] === 'string');
    expect(png).toBeDefined();
    expect((png as { data: Record<string, string> }).data['image/png']!.startsWith(PNG_SIGNATURE)).toBe(true);

    await kernel.execute('kept <- 41');
    const kept = await kernel.execute('cat(kept + 1)');
    expect(kept.stdout).toBe('42');
  });

  it('interrupts Sys.sleep(60) within 3 s as an interrupted result, and answers the next cell', async () => {
    const started = Date.now();
    const pending = kernel.execute('Sys.sleep(60)');
    await new Promise((r) => setTimeout(r, 500));
    const { delivered } = await kernel.interrupt();
    expect(delivered).toBe(true);
    const result: ExecuteResult = await pending;
    expect(Date.now() - started).toBeLessThan(3500);
    expect(result.status).toBe('aborted');
    expect(result.error?.ename).toBe('Interrupted');
    const next = await kernel.execute('cat("after")');
    expect(next).toMatchObject({ status: 'ok', stdout: 'after' });
  });
});

describe('R in a KernelSession on the real server', () => {
  it("runs the watchdog's full ladder on an R loop that ignores interrupts: kill, restart, fresh generation", async () => {
    const gateway = testGateway();
    const watchdog = createWatchdog({ cellTimeoutMs: 1500, interruptGraceMs: 1000, killGraceMs: 1000 });
    const steps: string[] = [];
    watchdog.on('*', (event) => steps.push(event.type));
    const session = new KernelSession<GatewayKernel>({
      python: () => GatewayKernel.start({ gateway }),
      r: createRSlot({ spawn: (ctx) => startIRKernel({ gateway, signal: ctx.signal }) }),
      executor: watchdog,
    });
    try {
      await session.execute('x <- 1', { language: 'r' });
      const before = session.supervisor.status('r').generation;
      const outcome = await session.execute('suspendInterrupts(repeat {})', { language: 'r' }).then(
        (r) => r,
        (e: unknown) => e,
      );
      expect(CellTimeoutError.isInstance(outcome)).toBe(true);
      expect((outcome as Error).message).toMatch(/^cell exceeded/);
      expect(steps.filter((s) => s === 'interrupt')).toHaveLength(1);
      expect(steps.filter((s) => s === 'kill')).toHaveLength(1);
      expect(steps.filter((s) => s === 'restart')).toHaveLength(1);
      expect(session.supervisor.status('r').generation).toBe(before + 1);
      const next = await session.execute('cat(exists("x"))', { language: 'r' });
      expect(next).toMatchObject({ status: 'ok', stdout: 'FALSE' });

      // A plain `repeat {}` honours the interrupt: the first rung recovers it and the variables survive.
      await session.execute('y <- 5', { language: 'r' });
      const interrupted = await session.execute('repeat {}', { language: 'r' });
      expect(interrupted.status).toBe('aborted');
      expect((await session.execute('cat(y)', { language: 'r' })).stdout).toBe('5');
    } finally {
      await session.close();
    }
  });

  it('alternates Python and R cells, and a killed R process does not disturb Python', async () => {
    const gateway = testGateway();
    const session = new KernelSession<GatewayKernel>({
      python: () => GatewayKernel.start({ gateway }),
      r: createRSlot({ spawn: (ctx) => startIRKernel({ gateway, signal: ctx.signal }) }),
    });
    try {
      expect((await session.execute('a = 1; print(a)')).stdout).toBe('1\n');
      expect((await session.execute('b <- 2; cat(b)', { language: 'r' })).stdout).toBe('2');
      expect((await session.execute('print(a + 1)')).stdout).toBe('2\n');
      expect((await session.execute('cat(b + 1)', { language: 'r' })).stdout).toBe('3');

      const rKernel = session.supervisor.lease('r')!.kernel;
      const pyLease = session.supervisor.lease('python')!;
      const pids = await waitForPids(rKernel.id);
      expect(pids.length).toBeGreaterThan(0);
      const dying = session.execute('Sys.sleep(30)', { language: 'r' }).then(
        (r) => r,
        (e: unknown) => e,
      );
      await new Promise((r) => setTimeout(r, 500));
      for (const pid of pids) process.kill(pid, 'SIGKILL');
      const outcome = await dying;
      expect(outcome instanceof Error || (outcome as ExecuteResult).status !== 'ok').toBe(true);

      expect(session.supervisor.lease('python')).toBe(pyLease);
      expect((await session.execute('print(a + 2)')).stdout).toBe('3\n');
      const after = await session.execute('cat("r again")', { language: 'r' });
      expect(after).toMatchObject({ status: 'ok', stdout: 'r again' });
    } finally {
      await session.close();
    }
  });

  it('soft-fails an R cell when R is missing on the server, and the next Python cell runs', async () => {
    // Debian's kernelspecs live in /usr/share/jupyter, which every server searches; the server's own data dir comes
    // first, so an `ir` kernelspec there whose R does not exist stands for a machine without R.
    const root = mkdtempSync(join(testGateway().root, 'no-r-'));
    const spec = join(root, 'data', 'kernels', 'ir');
    mkdirSync(spec, { recursive: true });
    writeFileSync(
      join(spec, 'kernel.json'),
      JSON.stringify({
        argv: [join(root, 'no-such-R'), '--slave', '-e', 'IRkernel::main()', '--args', '{connection_file}'],
        display_name: 'R',
        language: 'R',
      }),
    );
    const server = await startTestServer({ root });
    const gateway = { baseUrl: server.baseUrl, token: server.token };
    const session = new KernelSession<GatewayKernel>({
      python: () => GatewayKernel.start({ gateway }),
      r: createRSlot({ spawn: (ctx) => startIRKernel({ gateway, signal: ctx.signal }) }),
    });
    try {
      expect((await session.execute('print("py first")')).stdout).toBe('py first\n');
      const r = await session.execute('cat(1)', { language: 'r' });
      expect(r.status).toBe('error');
      expect(r.error?.ename).toBe('RKernelUnavailable');
      expect(r.error?.evalue).toMatch(/^R kernel unavailable: .+/);
      expect((await session.execute('print("py after")')).stdout).toBe('py after\n');
    } finally {
      await session.close();
      await server.stop();
    }
  });
});

describe('startIRKernel on the embedded LocalGateway', () => {
  it("returns from shutdown() once no process carrying the kernel's marker is left, R's own children included", async () => {
    const base = mkdtempSync(join(testGateway().root, 'r-local-'));
    const ticket = await LocalGateway.acquire({ stateDir: join(base, 'state'), lingerMs: 0 });
    try {
      const kernel = await startIRKernel({ gateway: ticket, startupTimeoutMs: 60_000 });
      const marker = kernelMarker({ kernelId: kernel.id });
      // A child in a process group of its own: no group signal reaches it, only its marker names it.
      const started = await kernel.execute('system("setsid sleep 300", wait = FALSE); cat("started")');
      expect(started).toMatchObject({ status: 'ok', stdout: 'started' });
      let carrying = processesCarrying(marker);
      for (let i = 0; i < 100 && carrying.length < 2; i++) {
        await new Promise((r) => setTimeout(r, 50));
        carrying = processesCarrying(marker);
      }
      expect(carrying.length).toBeGreaterThanOrEqual(2); // R and the sleep
      const { confirmed } = await kernel.shutdown();
      expect(confirmed).toBe(true);
      expect(processesCarrying(marker)).toEqual([]);
    } finally {
      await ticket.release();
    }
  });
});
