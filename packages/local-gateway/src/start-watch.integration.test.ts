import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GatewayClient, GatewayKernel, KernelStartError } from '@kernelwarden/gateway-client';
import { testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalGateway, type LocalGatewayTicket } from './index.js';

// A kernelspec whose process exits at once with its own error on stderr, like a venv kernelspec run by the base
// interpreter (`No module named ipykernel_launcher`). `python3` is replaced by the server's own interpreter.
const SPEC_NAME = `kw-dies-${randomBytes(3).toString('hex')}`;
const MODULE = 'kw_no_such_module_for_start';
const spec = {
  argv: ['python3', '-c', `import ${MODULE}`, '{connection_file}'],
  display_name: 'dies while starting',
  language: 'python',
};

function writeSpec(kernelsDir: string): string {
  const dir = join(kernelsDir, SPEC_NAME);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'kernel.json'), JSON.stringify(spec));
  return dir;
}

/** When the server logged `text` (jupyter-server's records carry the local time: `[W 2026-12-01 22:52:21.785 …]`). */
function serverLogTime(logFile: string, text: string): number | undefined {
  const line = readFileSync(logFile, 'utf8')
    .split('\n')
    .find((l) => l.includes(text));
  const stamp = line && /^\[[A-Z] (\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d\.\d{3})/.exec(line);
  return stamp ? new Date(`${stamp[1]}T${stamp[2]}`).getTime() : undefined;
}

async function listed(client: GatewayClient): Promise<string[]> {
  return (await client.listKernels()).map((k) => k.name);
}

describe('a kernel that dies while starting', () => {
  let base: string;
  let ticket: LocalGatewayTicket;

  beforeAll(async () => {
    base = join(testGateway().root, `start-watch-${randomBytes(4).toString('hex')}`);
    writeSpec(join(base, 'jupyter', 'kernels'));
    ticket = await LocalGateway.acquire({
      stateDir: join(base, 'state'),
      lingerMs: 0,
      jupyterPath: [join(base, 'jupyter')],
    });
  });

  afterAll(async () => {
    await ticket?.release();
  });

  it('fails the start within seconds with KernelStartError carrying its stderr, on LocalGateway', async () => {
    const client = new GatewayClient({
      baseUrl: ticket.baseUrl,
      token: ticket.token,
      ownership: ticket.ownership,
      diagnostics: ticket.diagnostics,
    });
    const started = Date.now();
    const error = await GatewayKernel.start({ gateway: client, kernelName: SPEC_NAME, startupTimeoutMs: 60_000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    const elapsed = Date.now() - started;
    expect(KernelStartError.isInstance(error)).toBe(true);
    const message = (error as Error).message;
    expect(message).toMatch(/died while starting: its process exited/);
    expect(message).toContain(`No module named '${MODULE}'`);
    expect(message).not.toContain(ticket.token);
    // The restarter alone would take 5 tries 3 s apart; the start deadline is 60 s.
    expect(elapsed).toBeLessThan(5_000);
    expect(await listed(client)).not.toContain(SPEC_NAME);
  });

  it('fails the start with what the server says when no diagnostics are at hand (a remote server)', async () => {
    const gw = testGateway();
    // The run's server reads kernelspecs from its JUPYTER_DATA_DIR (<root>/gateway/data) on every request.
    const dir = writeSpec(join(gw.root, 'gateway', 'data', 'kernels'));
    try {
      const client = new GatewayClient({ baseUrl: gw.baseUrl, token: gw.token });
      const started = Date.now();
      const error = await GatewayKernel.start({
        gateway: client,
        kernelName: SPEC_NAME,
        startupTimeoutMs: 60_000,
      }).then(
        () => undefined,
        (e: unknown) => e,
      );
      const failedAt = Date.now();
      expect(KernelStartError.isInstance(error)).toBe(true);
      const message = (error as Error).message;
      expect(message).toMatch(/died while starting: the server no longer lists it/);
      // A remote server says nothing until its restarter gives up (5 tries 3 s apart, ~18 s) and drops the kernel;
      // from then the start fails within seconds, long before its 60 s deadline.
      const id = /Kernel ([0-9a-f-]{36})/.exec(message)?.[1];
      const dropped = serverLogTime(gw.logFile, `Kernel ${id} died, removing from map`);
      expect(dropped, `the server log records dropping kernel ${id}`).toBeDefined();
      expect(failedAt - dropped!).toBeLessThan(5_000);
      expect(failedAt - started).toBeLessThan(40_000);
      expect(await listed(client)).not.toContain(SPEC_NAME);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
