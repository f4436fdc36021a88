import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { ExecuteResult, Output } from '@kernelwarden/core';
import { kernelPids, testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket as WsWebSocket } from 'ws';
import {
  GatewayAuthError,
  GatewayClient,
  GatewayKernel,
  GatewayUnavailableError,
  KernelDiedError,
  KernelStartError,
  type WebSocketClass,
} from './index.js';

const PNG_CELL = [
  'import base64',
  'from IPython.display import Image, display',
  "png = base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==')",
  'display(Image(data=png))',
].join('\n');

function gateway() {
  const { baseUrl, token } = testGateway();
  return { baseUrl, token };
}

describe('GatewayKernel on the real jupyter-server (python3)', () => {
  let kernel: GatewayKernel;

  beforeAll(async () => {
    kernel = await GatewayKernel.start({ gateway: gateway(), startupTimeoutMs: 60_000 });
  });
  afterAll(async () => {
    await kernel?.shutdown();
  });

  it('negotiates the v1 wire format by default and reports idle', () => {
    expect(kernel.protocol).toBe('v1');
    expect(kernel.status).toBe('idle');
    expect(kernel.isAlive()).toBe(true);
    expect(kernel.info?.language).toBe('python');
  });

  it('returns an expression value with its execution count and the cell id', async () => {
    const result = await kernel.execute('6 * 7', { cellId: 'cell-answer' });
    expect(result.status).toBe('ok');
    expect(result.cellId).toBe('cell-answer');
    expect(result.executionCount).toBeGreaterThan(0);
    expect(result.outputs).toContainEqual(
      expect.objectContaining({ type: 'execute_result', data: expect.objectContaining({ 'text/plain': '42' }) }),
    );
  });

  it('keeps stdout and stderr apart and streams every output in order', async () => {
    const seen: Output[] = [];
    const result = await kernel.execute(
      "import sys\nprint('to out', flush=True)\nprint('to err', file=sys.stderr, flush=True)\nprint('out again')",
      { onOutput: (o) => seen.push(o) },
    );
    expect(result.stdout).toBe('to out\nout again\n');
    expect(result.stderr).toBe('to err\n');
    expect(seen.filter((o) => o.type === 'stream').map((o) => (o as { name: string }).name)).toEqual([
      'stdout',
      'stderr',
      'stdout',
    ]);
  });

  it('reports an exception with ename, evalue and traceback', async () => {
    const result = await kernel.execute("raise ValueError('bad value')");
    expect(result.status).toBe('error');
    expect(result.error).toMatchObject({ ename: 'ValueError', evalue: 'bad value' });
    expect(result.error?.traceback.length).toBeGreaterThan(0);
    expect(result.outputs.some((o) => o.type === 'error')).toBe(true);
  });

  it('returns a PNG display', async () => {
    const result = await kernel.execute(PNG_CELL);
    expect(result.status).toBe('ok');
    const display = result.outputs.find((o) => o.type === 'display_data');
    expect(display).toBeDefined();
    expect(typeof (display as { data: Record<string, unknown> }).data['image/png']).toBe('string');
  });

  it('answers stdin through onInput', async () => {
    const prompts: string[] = [];
    const result = await kernel.execute("name = input('who? ')\nprint('hello', name)", {
      onInput: ({ prompt }) => {
        prompts.push(prompt);
        return 'ada';
      },
    });
    expect(prompts).toEqual(['who? ']);
    expect(result.stdinRequested).toBe(true);
    expect(result.stdout).toContain('hello ada');
  });

  it('fails input() at once when no onInput is given', async () => {
    const result = await kernel.execute("input('never answered? ')", { timeoutMs: 20_000 });
    expect(result.timedOut).toBe(false);
    expect(result.status).toBe('error');
    expect(result.error?.ename).toBe('StdinNotImplementedError');
  });

  it('stops time.sleep(60) on interrupt within 2 s and keeps the variables', async () => {
    await kernel.execute('kept = 1234');
    // Interrupt once the cell is inside the sleep: a SIGINT that lands before ipykernel runs the cell (its 'busy'
    // comes first) is not turned into a KeyboardInterrupt.
    let sleeping!: () => void;
    const started = new Promise<void>((r) => (sleeping = r));
    const running = kernel.execute("import time\nprint('sleeping', flush=True)\ntime.sleep(60)", {
      onOutput: (o) => {
        if (o.type === 'stream' && o.text.includes('sleeping')) sleeping();
      },
    });
    await started;
    const t0 = performance.now();
    await expect(kernel.interrupt()).resolves.toEqual({ delivered: true });
    const result = await running;
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(result.status).toBe('error');
    expect(result.error?.ename).toBe('KeyboardInterrupt');
    const after = await kernel.execute('kept');
    expect(after.outputs).toContainEqual(
      expect.objectContaining({ data: expect.objectContaining({ 'text/plain': '1234' }) }),
    );
  });

  it('cancels a cell through its signal: settles at once and interrupts the kernel', async () => {
    const controller = new AbortController();
    const running = kernel.execute("import time\nprint('started', flush=True)\ntime.sleep(60)", {
      signal: controller.signal,
      onOutput: () => controller.abort(new Error('enough')),
    });
    const result = await running;
    expect(result).toMatchObject({ status: 'aborted', cancelled: true, timedOut: false });
    // The kernel was interrupted: the next cell runs at once.
    const next = await kernel.execute('1 + 1', { timeoutMs: 10_000 });
    expect(next.status).toBe('ok');
  });

  it('times a cell out with timedOut: true', async () => {
    const result = await kernel.execute('import time\ntime.sleep(60)', { timeoutMs: 300 });
    expect(result).toMatchObject({ status: 'aborted', cancelled: true, timedOut: true });
    expect((await kernel.execute('2 + 2', { timeoutMs: 10_000 })).status).toBe('ok');
  });

  it('marks a 20 MB cell outputDropped on a server with default iopub rate limits, keeping memory to the caps', async () => {
    const dropped: string[] = [];
    const off = kernel.on('output-dropped', (e) => dropped.push(e.cellId));
    const result = await kernel.execute("for i in range(200000):\n    print('x' * 99)", { cellId: 'twenty-mb' });
    off();
    expect(result.status).toBe('ok');
    expect(result.outputDropped).toBe(true);
    expect(dropped).toEqual(['twenty-mb']);
    expect(result.stdout.length).toBeLessThanOrEqual(1_048_576);
  });

  it('restart() clears the variables, keeps the handle and reports restarting then idle', async () => {
    await kernel.execute('forgotten = 1');
    const statuses: string[] = [];
    const off = kernel.on('status', (e) => statuses.push(e.status));
    await kernel.restart();
    off();
    expect(statuses[0]).toBe('restarting');
    expect(statuses.at(-1)).toBe('idle');
    expect(kernel.isAlive()).toBe(true);
    const result = await kernel.execute('forgotten');
    expect(result.status).toBe('error');
    expect(result.error?.ename).toBe('NameError');
  });

  it('settles a cell within 5 s with KernelDiedError when the kernel process is killed -9, and the very next cell works', async () => {
    // Three rounds: jupyter-server auto-restarts the kernel each time (new ports while it is young), and the first
    // cell after each recovery must complete, even when it runs before the new socket's iopub subscription reached the
    // kernel (its status idle could otherwise be lost).
    for (let round = 1; round <= 3; round++) {
      let busy!: () => void;
      const started = new Promise<void>((r) => (busy = r));
      const running = kernel.execute("import time\nprint('go', flush=True)\ntime.sleep(60)", {
        onOutput: () => busy(),
      });
      const outcome = running.then(
        (r) => r,
        (e: unknown) => e,
      );
      await started;
      const pids = kernelPids(kernel.id);
      expect(pids.length).toBeGreaterThan(0);
      const t0 = performance.now();
      for (const pid of pids) process.kill(pid, 'SIGKILL');
      const settled = await outcome;
      expect(performance.now() - t0).toBeLessThan(5000);
      expect(KernelDiedError.isInstance(settled)).toBe(true);
      expect((settled as KernelDiedError).reason).toBe('restarted');
      const after = await kernel.execute(`print('round', ${round})\n${round} * 7`, { timeoutMs: 30_000 });
      expect(after).toMatchObject({ status: 'ok', stdout: `round ${round}\n`, timedOut: false });
      expect(after.outputs.at(-1)).toMatchObject({ type: 'execute_result', data: { 'text/plain': String(round * 7) } });
    }
  }, 120_000);
});

describe('GatewayKernel wire formats on the real server', () => {
  const cells = [
    '1 + 1',
    "print('a')\nimport sys\nprint('b', file=sys.stderr)",
    "raise KeyError('k')",
    PNG_CELL,
    "from IPython.display import display\ndisplay({'application/json': {'x': [1, 2]}}, raw=True)",
  ];

  function normalise(r: ExecuteResult) {
    return {
      status: r.status,
      stdout: r.stdout,
      stderr: r.stderr,
      error: r.error && { ename: r.error.ename, evalue: r.error.evalue },
      outputs: r.outputs.map((o) =>
        o.type === 'error' ? { type: o.type, ename: o.ename } : { ...o, executionCount: undefined },
      ),
    };
  }

  it('gives identical results for the same cells in v1 and legacy', async () => {
    const results: Record<string, unknown[]> = {};
    for (const protocol of ['v1', 'legacy'] as const) {
      await using kernel = await GatewayKernel.start({ gateway: gateway(), protocol });
      expect(kernel.protocol).toBe(protocol);
      results[protocol] = [];
      for (const code of cells) results[protocol].push(normalise(await kernel.execute(code)));
    }
    expect(results.legacy).toEqual(results.v1);
  });
});

describe('GatewayKernel reconnect on the real server', () => {
  it('keeps a silent cell on its socket: jupyter-server answers the heartbeat pings, nothing reconnects', async () => {
    await using kernel = await GatewayKernel.start({ gateway: gateway(), livenessPollMs: 50, heartbeatMs: 200 });
    const events: string[] = [];
    kernel.on('reconnecting', () => events.push('reconnecting'));
    const result = await kernel.execute("import time\ntime.sleep(2)\nprint('woke')");
    expect(result).toMatchObject({ status: 'ok', stdout: 'woke\n' });
    expect(events).toEqual([]);
  });

  for (const how of ['close', 'terminate'] as const) {
    it(`returns every line of a cell once and in order when the socket drops mid-cell (${how}), or says the server dropped some`, async () => {
      const sockets: WsWebSocket[] = [];
      class TrackedWebSocket extends WsWebSocket {
        constructor(...args: ConstructorParameters<typeof WsWebSocket>) {
          super(...args);
          sockets.push(this);
        }
      }
      const client = new GatewayClient({
        ...gateway(),
        WebSocket: TrackedWebSocket as unknown as WebSocketClass,
      });
      await using kernel = await GatewayKernel.start({ gateway: client });
      const events: string[] = [];
      kernel.on('reconnecting', () => events.push('reconnecting'));
      kernel.on('reconnected', () => events.push('reconnected'));
      kernel.on('output-dropped', () => events.push('output-dropped'));
      let dropped = false;
      // The text so far: `print` writes a number and its newline apart, and the kernel may flush between the two.
      let seen = '';
      const result = await kernel.execute(
        'import time\nfor i in range(200):\n    print(i, flush=True)\n    time.sleep(0.005)',
        {
          onOutput: (o) => {
            if (o.type === 'stream') seen += o.text;
            if (!dropped && seen.includes('\n50\n')) {
              dropped = true;
              // A clean close from under the kernel, or an abrupt one (the TCP socket destroyed, as on a network
              // failure): what the server wrote before it noticed arrives, the rest is buffered and replayed.
              if (how === 'close') sockets.at(-1)?.close(4000, 'test drop');
              else sockets.at(-1)?.terminate();
            }
          },
        },
      );
      expect(dropped).toBe(true);
      expect(events).toContain('reconnected');
      expect(sockets.length).toBeGreaterThan(1);
      expect(result.status).toBe('ok');
      const received = result.stdout.trim().split('\n').map(Number);
      // A message the server lost can tear a line (its first digits were in it, "7" of "70"): when the result says
      // output was dropped, such a fragment is out of order and counts as missing below. Otherwise nothing is torn.
      const lines = result.outputDropped
        ? received.filter((n, i) => received.slice(0, i).every((m) => m < n))
        : received;
      // Once each and in order.
      expect(lines).toEqual([...new Set(lines)].sort((a, b) => a - b));
      // Every line — except what jupyter-server 1.23 itself loses: a message it hands to the dead socket before it
      // has processed the close is neither sent nor buffered (seen here on a loaded machine, mostly with
      // `terminate`: line 51). No client can get it back, but the kernel's message numbers show the hole, and the
      // result must then say so. (The report is conservative: a number missing from the drop window that was not
      // for this client also counts — seen once in several CI runs with every line present.)
      const missing = Array.from({ length: 200 }, (_, i) => i).filter((i) => !lines.includes(i));
      expect(missing.length, `lines ${missing.join(', ')} missing`).toBeLessThanOrEqual(2);
      if (missing.length > 0) {
        expect(result.outputDropped, `outputDropped with lines [${missing.join(', ')}] missing`).toBe(true);
        expect(events).toContain('output-dropped');
      }
      expect(events.includes('output-dropped')).toBe(result.outputDropped === true);
    });
  }
});

describe('GatewayClient bad input on the real server', () => {
  it('names the URL of an unreachable gateway', async () => {
    const client = new GatewayClient({ baseUrl: 'http://127.0.0.1:9' });
    const error = await client.listKernels().catch((e: unknown) => e);
    expect(GatewayUnavailableError.isInstance(error)).toBe(true);
    expect((error as Error).message).toContain('http://127.0.0.1:9');
  });

  it('rejects a wrong token with GatewayAuthError and never prints the token', async () => {
    const token = 'not-the-right-token-1234567890';
    const client = new GatewayClient({ baseUrl: testGateway().baseUrl, token });
    const error = await client.listKernels().catch((e: unknown) => e);
    expect(GatewayAuthError.isInstance(error)).toBe(true);
    expect((error as Error).message).not.toContain(token);
    expect((error as Error).message).not.toContain(testGateway().token);
  });

  it('lists kernelspecs with python3', async () => {
    const client = new GatewayClient(gateway());
    const specs = await client.kernelSpecs();
    expect(specs.kernelspecs.python3?.spec.language).toBe('python');
  });
});

describe('GatewayKernel environment step on the real server', () => {
  it('applies cwd, env and the prelude on a Python kernel', async () => {
    const dir = join(testGateway().root, 'py-cwd');
    mkdirSync(dir, { recursive: true });
    await using kernel = await GatewayKernel.start({
      gateway: gateway(),
      cwd: dir,
      env: { KW_GREETING: 'hello "there"' },
      prelude: 'PRELUDE_RAN = True',
    });
    const result = await kernel.execute(
      "import os\nprint(os.getcwd())\nprint(os.environ['KW_GREETING'])\nprint(PRELUDE_RAN)",
    );
    expect(result.stdout).toBe(`${dir}\nhello "there"\nTrue\n`);
  });

  it("sends the environment step ahead ('ahead'): the first cell, sent at once behind it, runs in that cwd and env", async () => {
    const dir = join(testGateway().root, 'py-cwd-ahead');
    mkdirSync(dir, { recursive: true });
    await using kernel = await GatewayKernel.start({
      gateway: gateway(),
      cwd: dir,
      env: { KW_GREETING: 'ahead' },
      environmentStep: 'ahead',
    });
    const result = await kernel.execute("import os\nprint(os.getcwd())\nprint(os.environ['KW_GREETING'])");
    expect(result.stdout).toBe(`${dir}\nahead\n`);
    expect((await kernel.execute('print(sorted(k for k in dir() if "kernelwarden" in k))')).stdout).toBe('[]\n');
  });

  it('refuses every cell of a kernel whose environment step sent ahead failed, and none of their code runs', async () => {
    const marker = join(testGateway().root, `ahead-ran-${Date.now()}`);
    await using kernel = await GatewayKernel.start({
      gateway: gateway(),
      cwd: join(testGateway().root, 'no-such-directory'),
      environmentStep: 'ahead',
    });
    const cell = `open(${JSON.stringify(marker)}, 'w').write('ran')`;
    const first = kernel.execute(cell).catch((e: unknown) => e);
    const second = kernel.execute(cell).catch((e: unknown) => e);
    for (const error of [await first, await second]) {
      expect(KernelStartError.isInstance(error)).toBe(true);
      expect((error as Error).message).toMatch(/^Failed to initialize kernel environment: FileNotFoundError: /);
    }
    await expect(kernel.execute(cell)).rejects.toThrow(/^Failed to initialize kernel environment/);
    // The kernel itself runs nothing any more, whoever sends the cell: another client attached to it gets an error.
    const other = await GatewayKernel.connect({ gateway: gateway(), kernelId: kernel.id });
    try {
      const refused = await other.execute(cell);
      expect(refused.status).toBe('error');
      expect(refused.error?.evalue).toContain('could not be set: it runs nothing');
    } finally {
      other.detach();
    }
    expect(existsSync(marker)).toBe(false);
  });

  it('fails the start with KernelStartError when the prelude raises, and deletes the kernel', async () => {
    // Other test files create kernels on the same gateway at the same time: follow this start's own kernel.
    const created: string[] = [];
    const client = new GatewayClient({
      ...gateway(),
      ownership: { created: (id) => created.push(id), deleted: () => {} },
    });
    const error = await GatewayKernel.start({ gateway: client, prelude: "raise RuntimeError('bad prelude')" }).catch(
      (e: unknown) => e,
    );
    expect(KernelStartError.isInstance(error)).toBe(true);
    expect((error as Error).message).toContain('Failed to initialize kernel prelude: RuntimeError: bad prelude');
    expect(created).toHaveLength(1);
    const listed = (await client.listKernels()).map((k) => k.id);
    expect(listed).not.toContain(created[0]);
  });

  it("applies cwd and env on an R kernel (IRkernel), and maps its interrupt reply to 'aborted'", async () => {
    const dir = join(testGateway().root, 'r-cwd');
    mkdirSync(dir, { recursive: true });
    await using kernel = await GatewayKernel.start({
      gateway: gateway(),
      kernelName: 'ir',
      cwd: dir,
      env: { KW_R_VAR: 'from-env' },
    });
    expect(kernel.info?.language).toBe('R');
    const result = await kernel.execute('cat(getwd(), "\\n", Sys.getenv("KW_R_VAR"), "\\n", sep = "")');
    expect(result.stdout).toBe(`${dir}\nfrom-env\n`);
    // Interrupt only once R is inside the cell: IRkernel can die of a SIGINT that lands before (IRkernel#677).
    let running!: () => void;
    const started = new Promise<void>((r) => (running = r));
    const sleeping = kernel.execute('cat("go\\n"); flush.console(); Sys.sleep(60)', { onOutput: () => running() });
    await started;
    await kernel.interrupt();
    expect((await sleeping).status).toBe('aborted');
  });
});
