import { getEventListeners } from 'node:events';
import type { ExecuteResult } from '@kernelwarden/core';
import { InvalidOptionsError } from '@kernelwarden/core';
import { createMessage, encodeV1, type JupyterMessage } from '@kernelwarden/jupyter-protocol';
import { FakeWebSocket, ManualClock } from '@kernelwarden/testkit';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KernelDiedError, KernelStartError } from './errors.js';
import type { GatewayClientOptions, WebSocketClass } from './gateway-client.js';
import { GatewayKernel, type GatewayKernelStartOptions } from './gateway-kernel.js';
import {
  BASE,
  calls,
  gatewayFetch,
  json,
  KernelSocket,
  lastSocket,
  resetKernelSockets,
  settleIo,
  start,
} from './gateway-kernel.test-fixture.js';
import { DEFAULT_REPLY_GRACE_MS } from './gateway-kernel-options.js';

beforeEach(resetKernelSockets);
afterEach(resetKernelSockets);

describe('GatewayKernel lifecycle (seed behaviours)', () => {
  it('starts, interrupts and shuts down: POST create, POST interrupt, DELETE; isAlive false after', async () => {
    using hook = gatewayFetch('kernel-123');
    const kernel = await start();
    expect(calls(hook, 'POST', '/api/kernels')).toHaveLength(1);
    expect(kernel.id).toBe('kernel-123');
    await expect(kernel.interrupt()).resolves.toEqual({ delivered: true });
    expect(calls(hook, 'POST', '/api/kernels/kernel-123/interrupt')).toHaveLength(1);
    await expect(kernel.shutdown()).resolves.toEqual({ confirmed: true });
    expect(calls(hook, 'DELETE', '/api/kernels/kernel-123')).toHaveLength(1);
    expect(kernel.isAlive()).toBe(false);
    expect(kernel.status).toBe('closed');
    expect(lastSocket().readyState).toBe(FakeWebSocket.CLOSED);
  });

  it('rejects a start stalled after the socket opened with the signal reason within 50 ms, deleting the kernel and closing the socket', async () => {
    using hook = gatewayFetch('kernel-stalled');
    let preludeStarted!: () => void;
    const stalled = new Promise<void>((r) => (preludeStarted = r));
    KernelSocket.script = { execute: () => preludeStarted() };
    const controller = new AbortController();
    const starting = start({ prelude: 'x = 1', signal: controller.signal });
    await stalled;
    controller.abort(new Error('cancel startup'));
    const pending = Symbol('pending');
    const settled = await Promise.race([
      starting.then(
        () => 'resolved',
        (e: unknown) => e,
      ),
      new Promise((r) => setTimeout(() => r(pending), 50)),
    ]);
    expect(settled).toBeInstanceOf(Error);
    expect((settled as Error).message).toBe('cancel startup');
    expect(calls(hook, 'DELETE', '/api/kernels/kernel-stalled')).toHaveLength(1);
    expect(lastSocket().readyState).toBe(FakeWebSocket.CLOSED);
  });

  it('rejects a timed-out environment step with TimeoutError "Failed to initialize kernel environment" and cleans up', async () => {
    using hook = gatewayFetch('kernel-env');
    KernelSocket.script = { execute: () => {} };
    await expect(start({ cwd: '/tmp', startupTimeoutMs: 100 })).rejects.toMatchObject({
      name: 'TimeoutError',
      message: 'Failed to initialize kernel environment',
    });
    expect(calls(hook, 'DELETE', '/api/kernels/kernel-env')).toHaveLength(1);
    expect(lastSocket().readyState).toBe(FakeWebSocket.CLOSED);
  });

  it("sends the first cell before the environment step's reply with environmentStep 'ahead', and fails both when the step fails", async () => {
    using _hook = gatewayFetch('kernel-ahead');
    let step!: { request: JupyterMessage; replies: Parameters<NonNullable<typeof KernelSocket.script.execute>>[1] };
    KernelSocket.script = {
      execute: (request, replies, n) => {
        // A kernel runs its requests in order: the cell behind the step is not answered before it.
        if (n === 1) step = { request, replies };
        else queued.push(request);
      },
    };
    const queued: JupyterMessage[] = [];
    const kernel = await start({ cwd: '/nowhere', environmentStep: 'ahead' });
    const cell = kernel.execute('print(1)').catch((e: unknown) => e);
    await settleIo();
    const executes = lastSocket().kernel.requests.filter((r) => r.header.msg_type === 'execute_request');
    expect(executes.map((r) => (r.content as { code: string }).code)).toEqual([
      expect.stringContaining('chdir("/nowhere")'),
      'print(1)',
    ]);
    step.replies.send('iopub', 'status', { execution_state: 'busy' }, step.request);
    step.replies.send(
      'shell',
      'execute_reply',
      { status: 'error', ename: 'FileNotFoundError', evalue: "No such file or directory: '/nowhere'", traceback: [] },
      step.request,
    );
    step.replies.send('iopub', 'status', { execution_state: 'idle' }, step.request);
    // The kernel aborts the queued cell (stop_on_error), answered in the same read as the step's end.
    step.replies.send('iopub', 'status', { execution_state: 'busy' }, queued[0]);
    step.replies.send('shell', 'execute_reply', { status: 'aborted' }, queued[0]);
    step.replies.send('iopub', 'status', { execution_state: 'idle' }, queued[0]);
    const error = await cell;
    expect(KernelStartError.isInstance(error)).toBe(true);
    expect((error as Error).message).toBe(
      "Failed to initialize kernel environment: FileNotFoundError: No such file or directory: '/nowhere'",
    );
    await expect(kernel.execute('print(2)')).rejects.toBe(error);
    await kernel.shutdown();
  });

  it("waits for the environment step's reply by default before the start resolves", async () => {
    using _hook = gatewayFetch('kernel-wait');
    let replied = false;
    KernelSocket.script = {
      execute: (request, replies) =>
        setTimeout(() => {
          replied = true;
          replies.ok(request);
        }, 20),
    };
    const kernel = await start({ cwd: '/tmp' });
    expect(replied).toBe(true);
    await kernel.shutdown();
  });

  it('rejects a timed-out prelude with TimeoutError "Failed to initialize kernel prelude" and cleans up', async () => {
    using hook = gatewayFetch('kernel-prelude');
    KernelSocket.script = { execute: (req, replies, n) => (n === 1 ? replies.ok(req) : undefined) };
    await expect(start({ cwd: '/tmp', prelude: 'import time', startupTimeoutMs: 150 })).rejects.toMatchObject({
      name: 'TimeoutError',
      message: 'Failed to initialize kernel prelude',
    });
    expect(calls(hook, 'DELETE', '/api/kernels/kernel-prelude')).toHaveLength(1);
    expect(lastSocket().readyState).toBe(FakeWebSocket.CLOSED);
  });

  it('rejects a create that keeps failing (503) with KernelStartError carrying the status', async () => {
    using hook = gatewayFetch('never', (method, url) =>
      method === 'POST' && url.endsWith('/api/kernels') ? new Response('oops', { status: 503 }) : undefined,
    );
    const error = await start({ createAttempts: 2 }).catch((e: unknown) => e);
    expect(KernelStartError.isInstance(error)).toBe(true);
    expect((error as KernelStartError).message).toMatch(/^Failed to create kernel/);
    expect((error as KernelStartError).status).toBe(503);
    expect(calls(hook, 'POST', '/api/kernels')).toHaveLength(2);
    expect(FakeWebSocket.instances).toHaveLength(0);
  });

  it('returns unconfirmed on DELETE 503, then confirms on 404, then confirms without a third DELETE', async () => {
    let deletes = 0;
    using _hook = gatewayFetch('kernel-retry', (method) => {
      if (method !== 'DELETE') return undefined;
      deletes++;
      return new Response(deletes === 1 ? 'not yet' : 'gone', { status: deletes === 1 ? 503 : 404 });
    });
    const kernel = await start();
    await expect(kernel.shutdown()).resolves.toEqual({ confirmed: false });
    expect(kernel.isAlive()).toBe(false);
    expect(lastSocket().readyState).toBe(FakeWebSocket.CLOSED);
    await expect(kernel.shutdown()).resolves.toEqual({ confirmed: true });
    await expect(kernel.shutdown()).resolves.toEqual({ confirmed: true });
    expect(deletes).toBe(2);
  });

  it('returns unconfirmed when DELETE hangs past timeoutMs, aborting the request, and confirms on retry', async () => {
    let deletes = 0;
    let aborted!: () => void;
    const firstAborted = new Promise<void>((r) => (aborted = r));
    using _hook = gatewayFetch('kernel-hang', (method, _url, init) => {
      if (method !== 'DELETE') return undefined;
      deletes++;
      if (deletes > 1) return new Response(null, { status: 404 });
      return new Promise<Response>((_, reject) => {
        init?.signal?.addEventListener('abort', () => {
          aborted();
          reject(init.signal?.reason);
        });
      });
    });
    const kernel = await start();
    const pending = Symbol('pending');
    const settled = await Promise.race([
      kernel.shutdown({ timeoutMs: 25 }),
      new Promise((r) => setTimeout(() => r(pending), 250)),
    ]);
    await firstAborted;
    expect(settled).toEqual({ confirmed: false });
    expect(kernel.isAlive()).toBe(false);
    expect(lastSocket().readyState).toBe(FakeWebSocket.CLOSED);
    await expect(kernel.shutdown()).resolves.toEqual({ confirmed: true });
    expect(deletes).toBe(2);
  });

  it('returns unconfirmed without throwing when the DELETE fetch throws', async () => {
    using _hook = gatewayFetch('kernel-throw', (method) => {
      if (method === 'DELETE') throw new Error('delete failed');
      return undefined;
    });
    const kernel = await start();
    await expect(kernel.shutdown()).resolves.toEqual({ confirmed: false });
  });
});

describe('GatewayKernel execution against a scripted kernel', () => {
  it('completes when execute_reply and status idle arrive in either order, with the cell id in the request metadata', async () => {
    using _hook = gatewayFetch('k');
    KernelSocket.script = { execute: (req, r, n) => r.ok(req, { stdout: `run ${n}\n`, replyFirst: n % 2 === 0 }) };
    await using kernel = await start();
    const first = await kernel.execute('a', { cellId: 'cell-a' });
    const second = await kernel.execute('b', { cellId: 'cell-b' });
    expect([first.cellId, first.stdout, second.cellId, second.stdout]).toEqual([
      'cell-a',
      'run 1\n',
      'cell-b',
      'run 2\n',
    ]);
    const requests = lastSocket().kernel.requests.filter((m) => m.header.msg_type === 'execute_request');
    expect(requests.map((m) => m.metadata.cellId)).toEqual(['cell-a', 'cell-b']);
    expect(requests[0]?.content.allow_stdin).toBe(false);
    expect(requests[0]?.content.stop_on_error).toBe(false);
    expect(kernel.status).toBe('idle');
  });

  it('completes a cell whose idle the server lost once the socket stays silent after the reply, saying output was dropped', async () => {
    using _hook = gatewayFetch('k');
    KernelSocket.script = {
      execute: (req, r) => {
        r.send('iopub', 'status', { execution_state: 'busy' }, req);
        r.send('iopub', 'stream', { name: 'stdout', text: 'kept\n' }, req);
        r.send('shell', 'execute_reply', { status: 'ok', execution_count: 1 }, req);
        // status idle never arrives (ZMQ dropped it in the server)
      },
    };
    await using kernel = await start({ idleGraceMs: 50 });
    const dropped: string[] = [];
    kernel.on('output-dropped', (e) => dropped.push(e.cellId));
    const result = await kernel.execute('x', { cellId: 'c' });
    expect(result).toMatchObject({ status: 'ok', stdout: 'kept\n', outputDropped: true, executionCount: 1 });
    expect(dropped).toEqual(['c']);
    expect(kernel.status).toBe('idle');
  });

  it('keeps waiting for the idle while output still arrives after the reply', async () => {
    using _hook = gatewayFetch('k');
    KernelSocket.script = {
      execute: (req, r) => {
        r.send('iopub', 'status', { execution_state: 'busy' }, req);
        r.send('shell', 'execute_reply', { status: 'ok', execution_count: 1 }, req);
        // A backlog of iopub behind the reply (the server is behind the kernel): 8 lines, 30 ms apart.
        let n = 0;
        const timer = setInterval(() => {
          if (n < 8) {
            r.send('iopub', 'stream', { name: 'stdout', text: `${n++}\n` }, req);
            return;
          }
          clearInterval(timer);
          r.send('iopub', 'status', { execution_state: 'idle' }, req);
        }, 30);
      },
    };
    await using kernel = await start({ idleGraceMs: 60 });
    const result = await kernel.execute('x');
    expect(result.stdout).toBe('0\n1\n2\n3\n4\n5\n6\n7\n');
    expect(result.outputDropped).toBeUndefined();
  });

  it('settles a cell whose kernel went idle without replying as a KernelProtocolError after replyGraceMs', async () => {
    using _hook = gatewayFetch('k');
    KernelSocket.script = {
      execute: (req, r) => {
        if (!String(req.content.code).includes('\0')) return r.ok(req, { stdout: 'fine\n' });
        // ipykernel when its execute handler raises (code with a NUL): busy, idle, and no execute_reply.
        r.send('iopub', 'status', { execution_state: 'busy' }, req);
        r.send('iopub', 'status', { execution_state: 'idle' }, req);
      },
    };
    const clock = new ManualClock();
    await using kernel = await start({ clock, livenessPollMs: 0 });
    let result: ExecuteResult | undefined;
    const running = kernel.execute('x = 1\0', { cellId: 'c' }).then((r) => (result = r));
    await settleIo();
    await clock.advance(DEFAULT_REPLY_GRACE_MS - 1);
    await settleIo();
    expect(result).toBeUndefined();
    await clock.advance(1);
    await settleIo();
    await running;
    expect(result).toMatchObject({
      status: 'error',
      cellId: 'c',
      error: { ename: 'KernelProtocolError', traceback: [] },
    });
    expect(result?.error?.evalue).toMatch(/^the kernel went idle without replying to the cell/);
    expect(kernel.status).toBe('idle');
    expect(clock.pendingTimers()).toBe(0);
    // The kernel is still usable.
    expect((await kernel.execute('print(1)')).stdout).toBe('fine\n');
  });

  it('completes normally when the reply comes after the idle within replyGraceMs, and waits for ever with 0', async () => {
    using _hook = gatewayFetch('k');
    let late: (() => void) | undefined;
    KernelSocket.script = {
      execute: (req, r) => {
        r.send('iopub', 'status', { execution_state: 'busy' }, req);
        r.send('iopub', 'status', { execution_state: 'idle' }, req);
        late = () => r.send('shell', 'execute_reply', { status: 'ok', execution_count: 4 }, req);
      },
    };
    const clock = new ManualClock();
    await using kernel = await start({ clock, livenessPollMs: 0, replyGraceMs: 1000 });
    const first = kernel.execute('a');
    await settleIo();
    await clock.advance(900);
    late?.();
    expect(await first).toMatchObject({ status: 'ok', executionCount: 4 });

    await using patient = await start({ clock, livenessPollMs: 0, replyGraceMs: 0 });
    let settled = false;
    const second = patient.execute('b').finally(() => (settled = true));
    await settleIo();
    await clock.advance(60_000);
    await settleIo();
    expect(settled).toBe(false);
    late?.();
    expect(await second).toMatchObject({ status: 'ok' });
  });

  it('answers input_request through onInput and sets allow_stdin', async () => {
    using _hook = gatewayFetch('k');
    KernelSocket.script = {
      execute: (req, r) => r.send('stdin', 'input_request', { prompt: 'name? ', password: false }, req),
      other: (req, r) => {
        if (req.header.msg_type !== 'input_reply') return;
        const execute = lastSocket().kernel.requests.find((m) => m.header.msg_type === 'execute_request')!;
        r.ok(execute, { stdout: `hi ${req.content.value}\n` });
      },
    };
    await using kernel = await start();
    const result = await kernel.execute('input()', { onInput: ({ prompt }) => `${prompt.trim()}ada` });
    expect(result.stdinRequested).toBe(true);
    expect(result.stdout).toBe('hi name?ada\n');
  });

  it("maps IRkernel's execute_reply status 'abort' to status 'aborted'", async () => {
    using _hook = gatewayFetch('k');
    KernelSocket.script = { execute: (req, r) => r.ok(req, { status: 'abort' }) };
    await using kernel = await start();
    expect((await kernel.execute('Sys.sleep(60)')).status).toBe('aborted');
  });

  it('caps kept output and says truncated, while onOutput still sees everything', async () => {
    using _hook = gatewayFetch('k');
    KernelSocket.script = {
      execute: (req, r) => {
        r.send('iopub', 'status', { execution_state: 'busy' }, req);
        for (let i = 0; i < 5; i++) {
          r.send('iopub', 'stream', { name: 'stdout', text: '0123456789' }, req);
          r.send('iopub', 'display_data', { data: { 'text/plain': String(i) }, metadata: {} }, req);
        }
        r.send('shell', 'execute_reply', { status: 'ok', execution_count: 1 }, req);
        r.send('iopub', 'status', { execution_state: 'idle' }, req);
      },
    };
    await using kernel = await start({ outputCaps: { maxStreamChars: 15, maxOutputs: 3 } });
    let streamed = 0;
    const result = await kernel.execute('x', { onOutput: () => streamed++ });
    expect(streamed).toBe(10);
    expect(result.stdout).toBe('012345678901234');
    expect(result.outputs).toHaveLength(3);
    expect(result.truncated).toBe(true);
  });

  it('sets outputDropped and emits output-dropped when the server reports its IOPub rate limit', async () => {
    using _hook = gatewayFetch('k');
    KernelSocket.script = {
      execute: (req, r) => {
        r.send('iopub', 'status', { execution_state: 'busy' }, req);
        r.send(
          'iopub',
          'stream',
          { name: 'stderr', text: 'IOPub data rate exceeded.\nThe Jupyter server will…\n' },
          req,
        );
        r.send('shell', 'execute_reply', { status: 'ok', execution_count: 1 }, req);
        r.send('iopub', 'status', { execution_state: 'idle' }, req);
      },
    };
    await using kernel = await start();
    const dropped: string[] = [];
    kernel.on('output-dropped', (e) => dropped.push(e.cellId));
    const result = await kernel.execute('big', { cellId: 'big-cell' });
    expect(result.outputDropped).toBe(true);
    expect(dropped).toEqual(['big-cell']);
  });

  it('reports a malformed frame as a protocol-error event and keeps working', async () => {
    using _hook = gatewayFetch('k');
    await using kernel = await start();
    const errors: string[] = [];
    kernel.on('protocol-error', (e) => errors.push(e.error.code));
    lastSocket().receive(new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8, 9]));
    lastSocket().receive('not json at all');
    expect(errors).toEqual(['PROTOCOL', 'PROTOCOL']);
    expect((await kernel.execute('1')).status).toBe('ok');
  });

  it('settles at once with cancelled when the signal aborts, and interrupts the kernel', async () => {
    using hook = gatewayFetch('k');
    let running!: () => void;
    const started = new Promise<void>((r) => (running = r));
    KernelSocket.script = { execute: () => running() };
    await using kernel = await start();
    const controller = new AbortController();
    const execution = kernel.execute('sleep', { signal: controller.signal });
    await started;
    controller.abort();
    await expect(execution).resolves.toMatchObject({ status: 'aborted', cancelled: true, timedOut: false });
    expect(calls(hook, 'POST', '/api/kernels/k/interrupt')).toHaveLength(1);
  });

  it('sends a cell executed while an interrupt is in flight only once the gateway answered the interrupt', async () => {
    let answer!: () => void;
    const answered = new Promise<void>((r) => (answer = r));
    using hook = gatewayFetch('k', (method, url) =>
      method === 'POST' && url.endsWith('/interrupt')
        ? answered.then(() => new Response(null, { status: 204 }))
        : undefined,
    );
    await using kernel = await start();
    const executes = () => lastSocket().kernel.requests.filter((m) => m.header.msg_type === 'execute_request').length;
    const interrupted = kernel.interrupt();
    const execution = kernel.execute('after');
    await settleIo();
    expect(calls(hook, 'POST', '/api/kernels/k/interrupt')).toHaveLength(1);
    expect(executes()).toBe(0);
    answer();
    await expect(interrupted).resolves.toEqual({ delivered: true });
    await expect(execution).resolves.toMatchObject({ status: 'ok' });
    expect(executes()).toBe(1);
  });

  it('leaves no abort listener behind on a long-lived signal after 10,000 executions', async () => {
    using _hook = gatewayFetch('k');
    await using kernel = await start();
    const controller = new AbortController();
    for (let i = 0; i < 10_000; i++) await kernel.execute('1', { signal: controller.signal, timeoutMs: 60_000 });
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });
});

describe('GatewayKernel kernel death and connection loss', () => {
  it('fails pending executions at once with KernelDiedError when the server reports status dead', async () => {
    using _hook = gatewayFetch('k');
    KernelSocket.script = { execute: (_req, r) => r.send('iopub', 'status', { execution_state: 'dead' }) };
    await using kernel = await start();
    const error = await kernel.execute('x').catch((e: unknown) => e);
    expect(KernelDiedError.isInstance(error)).toBe(true);
    expect((error as KernelDiedError).reason).toBe('dead');
    expect(kernel.isAlive()).toBe(false);
    expect(kernel.status).toBe('dead');
  });

  it('fails the running cell with reason restarted when the server auto-restarts the kernel, and keeps the handle', async () => {
    using _hook = gatewayFetch('k');
    let executes = 0;
    KernelSocket.script = {
      execute: (req, r) =>
        ++executes === 1 ? r.send('iopub', 'status', { execution_state: 'restarting' }) : r.ok(req),
    };
    await using kernel = await start();
    const error = await kernel.execute('x').catch((e: unknown) => e);
    expect((error as KernelDiedError).reason).toBe('restarted');
    expect(kernel.isAlive()).toBe(true);
    expect((await kernel.execute('y')).status).toBe('ok');
    expect(FakeWebSocket.instances.length).toBe(2);
  });

  it('notices every auto-restart, though the server numbers its own status messages from 0 on each connection', async () => {
    using _hook = gatewayFetch('k');
    // jupyter_server writes `restarting` itself, under the client's session id, with a msg_id counted by each
    // connection's handler: the same id comes back after a reconnect and must not be taken for a replay.
    const restarting = (req: JupyterMessage) => {
      const msg = createMessage('iopub', 'status', req.header.session, { execution_state: 'restarting' });
      msg.header.msg_id = `${req.header.session}_4242_1`;
      return msg;
    };
    let executes = 0;
    KernelSocket.script = {
      execute: (req, r) => (++executes % 2 === 1 ? r.raw(restarting(req)) : r.ok(req, { stdout: 'ok' })),
    };
    await using kernel = await start();
    for (let round = 1; round <= 3; round++) {
      const error = await kernel.execute('x').catch((e: unknown) => e);
      expect((error as KernelDiedError).reason).toBe('restarted');
      expect(await kernel.execute('y')).toMatchObject({ status: 'ok', stdout: 'ok' });
    }
    expect(FakeWebSocket.instances.length).toBe(4);
  });

  it('fails a pending cell with reason gone when the kernel vanishes from REST while the socket is quiet', async () => {
    let gone = false;
    using _hook = gatewayFetch('k', (method, url) =>
      gone && method === 'GET' && url.endsWith('/api/kernels/k') ? new Response('', { status: 404 }) : undefined,
    );
    KernelSocket.script = { execute: () => (gone = true) };
    await using kernel = await start({ livenessPollMs: 10 });
    const error = await kernel.execute('x').catch((e: unknown) => e);
    expect(KernelDiedError.isInstance(error)).toBe(true);
    expect((error as KernelDiedError).reason).toBe('gone');
  });

  it('reconnects with the same session id and drops replayed duplicates', async () => {
    using _hook = gatewayFetch('k');
    let request!: (req: JupyterMessage) => void;
    const sent = new Promise<JupyterMessage>((r) => (request = r));
    KernelSocket.script = { execute: (req) => request(req) };
    await using kernel = await start({ reconnect: { initialDelayMs: 1 } });
    const reconnected = new Promise<void>((r) => kernel.on('reconnected', () => r()));
    const execution = kernel.execute('x');
    const req = await sent;
    const first = lastSocket();
    first.kernel.replies.send('iopub', 'stream', { name: 'stdout', text: 'line 1\n' }, req);
    await new Promise((r) => setImmediate(r));
    first.serverClose(1006);
    await reconnected;
    const second = lastSocket();
    expect(second).not.toBe(first);
    expect(new URL(second.url).searchParams.get('session_id')).toBe(new URL(first.url).searchParams.get('session_id'));
    // Replay: a message the client already saw arrives again (same msg_id), then the rest.
    const seen = first.kernel.requests.length;
    expect(seen).toBeGreaterThan(0);
    const duplicate = {
      ...req,
      channel: 'iopub',
      header: { ...req.header, session: 'kernel-session', msg_id: 'dup-1', msg_type: 'stream' },
      parent_header: req.header,
      content: { name: 'stdout', text: 'line 2\n' },
    };
    second.receive(encodeV1(duplicate));
    second.receive(encodeV1(duplicate));
    second.kernel.replies.ok(req);
    const result = await execution;
    expect(result.stdout).toBe('line 1\nline 2\n');
  });

  for (const lose of [true, false]) {
    it(`${lose ? 'says output was dropped' : 'says nothing was dropped'} when the kernel's message numbers ${lose ? 'show' : 'show no'} hole across a reconnect`, async () => {
      using _hook = gatewayFetch('k');
      let request!: (req: JupyterMessage) => void;
      const sent = new Promise<JupyterMessage>((r) => (request = r));
      KernelSocket.script = { execute: (req) => request(req) };
      await using kernel = await start({ reconnect: { initialDelayMs: 1 } });
      const dropped: string[] = [];
      kernel.on('output-dropped', (e) => dropped.push(e.cellId));
      const reconnected = new Promise<void>((r) => kernel.on('reconnected', () => r()));
      const execution = kernel.execute('x', { cellId: 'c1' });
      const req = await sent;
      // Numbered as jupyter_client numbers a kernel's messages: <session>_<pid>_<n>.
      const numbered = (n: number, channel: 'iopub' | 'shell', type: string, content: Record<string, unknown>) => {
        const msg = createMessage(channel, type, 'kernel-session', content, { parent: req.header });
        msg.header.msg_id = `kernel-session_777_${n}`;
        return msg;
      };
      const line = (n: number) => numbered(n, 'iopub', 'stream', { name: 'stdout', text: `line ${n}\n` });
      const first = lastSocket();
      first.kernel.replies.raw(numbered(1, 'iopub', 'status', { execution_state: 'busy' }));
      first.kernel.replies.raw(line(2));
      await new Promise((r) => setImmediate(r));
      first.serverClose(1006);
      await reconnected;
      const second = lastSocket();
      // The server's replay: line 3 was lost in its close window when `lose`.
      if (!lose) second.kernel.replies.raw(line(3));
      second.kernel.replies.raw(line(4));
      second.kernel.replies.raw(numbered(5, 'shell', 'execute_reply', { status: 'ok', execution_count: 1 }));
      second.kernel.replies.raw(numbered(6, 'iopub', 'status', { execution_state: 'idle' }));
      const result = await execution;
      expect(result.stdout).toBe(lose ? 'line 2\nline 4\n' : 'line 2\nline 3\nline 4\n');
      expect(result.outputDropped).toBe(lose ? true : undefined);
      expect(dropped).toEqual(lose ? ['c1'] : []);
    });
  }

  it('fails pending executions with KernelDiedError after the reconnect budget is spent', async () => {
    using _hook = gatewayFetch('k');
    KernelSocket.script = { execute: () => {} };
    await using kernel = await start({ reconnect: { attempts: 2, initialDelayMs: 1, maxDelayMs: 2 } });
    const lost = new Promise<void>((r) => kernel.on('connection-lost', () => r()));
    const execution = kernel.execute('x').catch((e: unknown) => e);
    await new Promise((r) => setImmediate(r));
    KernelSocket.failNew = true;
    lastSocket().serverClose(1006);
    await lost;
    const error = await execution;
    expect(KernelDiedError.isInstance(error)).toBe(true);
    expect((error as KernelDiedError).reason).toBe('connection-lost');
    expect(kernel.isAlive()).toBe(false);
  });
});

describe('GatewayKernel start and connection loss', () => {
  it('waits until iopub carries a kernel_info status before the first cell, so a slow-joining iopub loses nothing', async () => {
    using _hook = gatewayFetch('k');
    // iopub reaches the client only from the third kernel_info_request on: a cell sent after the first reply
    // would lose its status idle and never complete.
    KernelSocket.script = { iopubAfterInfos: 3 };
    await using kernel = await start();
    const infos = () => lastSocket().kernel.requests.filter((r) => r.header.msg_type === 'kernel_info_request').length;
    expect(infos()).toBe(3);
    const result = await kernel.execute('1');
    expect(result.status).toBe('ok');
  });

  it('accepts a kernel that never publishes a status for kernel_info after a few nudges', async () => {
    using _hook = gatewayFetch('k');
    KernelSocket.script = { kernelInfoStatus: false };
    await using kernel = await start();
    const infos = lastSocket().kernel.requests.filter((r) => r.header.msg_type === 'kernel_info_request').length;
    expect(infos).toBe(7);
    expect((await kernel.execute('1')).status).toBe('ok');
  });

  it('re-checks iopub after a server auto-restart before the next cell runs', async () => {
    using _hook = gatewayFetch('k');
    let executes = 0;
    KernelSocket.script = {
      iopubAfterInfos: 2,
      execute: (req, r) =>
        ++executes === 1 ? r.send('iopub', 'status', { execution_state: 'restarting' }) : r.ok(req, { stdout: 'y' }),
    };
    await using kernel = await start();
    const error = await kernel.execute('x').catch((e: unknown) => e);
    expect((error as KernelDiedError).reason).toBe('restarted');
    const result = await kernel.execute('y');
    expect(result).toMatchObject({ status: 'ok', stdout: 'y' });
    expect(FakeWebSocket.instances.length).toBe(2);
    const after = lastSocket().kernel.requests.map((r) => r.header.msg_type);
    expect(after.indexOf('execute_request')).toBeGreaterThan(after.lastIndexOf('kernel_info_request'));
    expect(after.filter((t) => t === 'kernel_info_request').length).toBeGreaterThanOrEqual(2);
  });

  it('rejects a start whose socket is lost for good during the handshake at once, not at the deadline', async () => {
    using hook = gatewayFetch('k-lost');
    KernelSocket.script = { kernelInfo: false };
    const starting = start({ reconnect: { attempts: 1, initialDelayMs: 1 }, startupTimeoutMs: 600_000 }).catch(
      (e: unknown) => e,
    );
    while (!lastSocket()?.kernel.requests.length) await new Promise((r) => setImmediate(r));
    KernelSocket.failNew = true;
    lastSocket().serverClose(1006);
    const error = await starting;
    expect(KernelDiedError.isInstance(error)).toBe(true);
    expect((error as KernelDiedError).reason).toBe('connection-lost');
    expect(calls(hook, 'DELETE', '/api/kernels/k-lost')).toHaveLength(1);
  });
});

describe('GatewayKernel options', () => {
  it('rejects invalid options with an error naming the field', async () => {
    const bad = await GatewayKernel.start({ gateway: { baseUrl: BASE }, startupTimeoutMs: -1 }).catch(
      (e: unknown) => e,
    );
    expect(InvalidOptionsError.isInstance(bad)).toBe(true);
    expect((bad as InvalidOptionsError).path).toBe('startupTimeoutMs');
    const badUrl = await GatewayKernel.start({ gateway: { baseUrl: 'ftp://x' } }).catch((e: unknown) => e);
    expect((badUrl as InvalidOptionsError).path).toBe('gateway.baseUrl');
    expect((badUrl as Error).message).toContain('gateway.baseUrl');
  });

  it('never sends the token in the socket URL of a ws-style class, only for WHATWG classes', async () => {
    using _hook = gatewayFetch('k');
    await using _kernel = await start();
    expect(lastSocket().url).toContain('token=');
    expect(lastSocket().url).toContain('session_id=');
  });
});

describe('GatewayKernel start cleanup', () => {
  /** DELETEs that hang until their request is aborted, except those `answer` says to answer. */
  function hangingDeletes(kernelId: string, answer: (n: number) => boolean = () => false) {
    const state = { deletes: 0, owned: [] as string[] };
    const hook = gatewayFetch(kernelId, (method, _url, init) => {
      if (method !== 'DELETE') return undefined;
      state.deletes++;
      if (answer(state.deletes)) return new Response(null, { status: 204 });
      return new Promise<Response>((_, reject) => {
        init?.signal?.addEventListener('abort', () => reject(init.signal?.reason), { once: true });
      });
    });
    const ownership = {
      created: (id: string) => state.owned.push(id),
      deleted: (id: string) => state.owned.splice(state.owned.indexOf(id), 1),
    };
    return { state, hook, ownership };
  }

  function stalledPrelude(): Promise<void> {
    return new Promise<void>((resolve) => {
      KernelSocket.script = { execute: () => resolve() };
    });
  }

  /** A start whose prelude never answers, on the manual clock, recording ownership; `abort` cancels it. */
  function stalledStart(
    clock: ManualClock,
    ownership: GatewayClientOptions['ownership'],
    cleanupRetry: GatewayKernelStartOptions['cleanupRetry'],
  ) {
    const stalled = stalledPrelude();
    const controller = new AbortController();
    const starting = GatewayKernel.start({
      gateway: {
        baseUrl: BASE,
        token: 'secret-token',
        WebSocket: KernelSocket as unknown as WebSocketClass,
        ownership,
      },
      prelude: 'x = 1',
      signal: controller.signal,
      clock,
      livenessPollMs: 0,
      cleanupTimeoutMs: 1_000,
      cleanupRetry,
    });
    return { stalled, starting, abort: (reason: Error) => controller.abort(reason) };
  }

  it('rejects an aborted start at once with the reason, and retries a hanging DELETE in the background until confirmed', async () => {
    const clock = new ManualClock();
    const { state, hook, ownership } = hangingDeletes('kernel-stuck', (n) => n >= 3);
    using _hook = hook;
    const { stalled, starting, abort } = stalledStart(clock, ownership, { initialDelayMs: 500, maxDelayMs: 500 });
    let outcome: unknown = 'pending';
    starting.then(
      () => (outcome = 'resolved'),
      (error: unknown) => (outcome = error),
    );
    await stalled;
    const reason = new Error('cancel startup');
    abort(reason);
    await settleIo();
    // At once: no clock time passed, the first DELETE still hangs.
    expect(outcome).toBe(reason);
    expect(lastSocket().readyState).toBe(FakeWebSocket.CLOSED);
    expect(state.deletes).toBe(1);
    expect(state.owned).toEqual(['kernel-stuck']);

    await clock.advance(1_000); // the first DELETE is given up
    expect(state.deletes).toBe(1);
    await clock.advance(500); // the backoff ends: the second one
    expect(state.deletes).toBe(2);
    await clock.advance(1_500); // given up, backoff, the third is answered
    expect(state.deletes).toBe(3);
    expect(state.owned).toEqual([]);
    await clock.advance(120_000);
    expect(state.deletes).toBe(3);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('gives up after cleanupRetry.attempts DELETEs, leaving the kernel recorded for the orphan sweep', async () => {
    const clock = new ManualClock();
    const { state, hook, ownership } = hangingDeletes('kernel-unreachable');
    using _hook = hook;
    const retry = { attempts: 4, initialDelayMs: 100, maxDelayMs: 400 };
    const { stalled, starting, abort } = stalledStart(clock, ownership, retry);
    const settled = starting.catch((error: unknown) => error);
    await stalled;
    abort(new Error('cancel startup'));
    expect(await settled).toMatchObject({ message: 'cancel startup' });
    // Backoff 100, 200, 400 between four attempts of 1 s each.
    await clock.advance(1_000 + 100);
    expect(state.deletes).toBe(2);
    await clock.advance(1_000 + 200);
    expect(state.deletes).toBe(3);
    await clock.advance(1_000 + 400);
    expect(state.deletes).toBe(4);
    await clock.advance(600_000);
    expect(state.deletes).toBe(4);
    expect(clock.pendingTimers()).toBe(0);
    expect(state.owned).toEqual(['kernel-unreachable']);
  });

  it('deletes a kernel whose create was still in flight when the start was aborted, retrying until confirmed', async () => {
    const clock = new ManualClock();
    let create!: () => void;
    const creating = new Promise<void>((resolve) => (create = resolve));
    let posted!: () => void;
    const postSeen = new Promise<void>((resolve) => (posted = resolve));
    let deletes = 0;
    using _hook = gatewayFetch('kernel-late', (method, url, init) => {
      if (method === 'POST' && url.endsWith('/api/kernels')) {
        posted();
        return creating.then(() => json({ id: 'kernel-late', name: 'python3' }, 201));
      }
      if (method !== 'DELETE') return undefined;
      // The start's chosen id is deleted at once too; this gateway ignored it (404).
      if (!url.endsWith('/kernel-late')) return new Response(null, { status: 404 });
      deletes++;
      if (deletes >= 2) return new Response(null, { status: 404 });
      return new Promise<Response>((_, reject) => {
        init?.signal?.addEventListener('abort', () => reject(init.signal?.reason), { once: true });
      });
    });
    const controller = new AbortController();
    const settled = start({ signal: controller.signal, clock, cleanupTimeoutMs: 1_000 }).catch((e: unknown) => e);
    await postSeen;
    controller.abort(new Error('gave up'));
    expect(await settled).toMatchObject({ message: 'gave up' });
    create();
    await settleIo();
    expect(deletes).toBe(1);
    await clock.advance(1_000);
    await clock.runAll();
    expect(deletes).toBe(2);
    expect(clock.pendingTimers()).toBe(0);
    expect(FakeWebSocket.instances).toHaveLength(0);
  });
});
