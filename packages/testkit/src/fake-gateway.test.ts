import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { FakeGateway } from './fake-gateway.js';
import { ChannelsClient } from './fixtures/channels-client.js';
import { ManualClock } from './manual-clock.js';
import { pythonConformanceCode } from './vitest.js';

const opened: ChannelsClient[] = [];
async function connect(gw: FakeGateway, kernelId: string, opts: { v1?: boolean; session?: string } = {}) {
  const client = await ChannelsClient.connect(gw, kernelId, opts);
  opened.push(client);
  return client;
}
afterEach(() => {
  for (const c of opened.splice(0)) c.ws.terminate();
});

async function createKernel(gw: FakeGateway, name = 'python3'): Promise<string> {
  const res = await fetch(`${gw.baseUrl}/api/kernels`, {
    method: 'POST',
    headers: { Authorization: `token ${gw.token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ name }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

function api(gw: FakeGateway, path: string, method = 'GET') {
  return fetch(`${gw.baseUrl}${path}`, { method, headers: { Authorization: `token ${gw.token}` } });
}

describe('FakeGateway REST', () => {
  it('serves kernelspecs and the kernel lifecycle, and requires the token by header or query', async () => {
    await using gw = await FakeGateway.start();
    expect(gw.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await fetch(`${gw.baseUrl}/api/kernels`)).status).toBe(403);
    expect((await fetch(`${gw.baseUrl}/api/kernels?token=wrong`)).status).toBe(403);
    expect((await fetch(`${gw.baseUrl}/api/kernels?token=${gw.token}`)).status).toBe(200);

    const specs = (await (await api(gw, '/api/kernelspecs')).json()) as Record<string, any>;
    expect(specs.default).toBe('python3');
    expect(specs.kernelspecs.python3.spec).toMatchObject({ language: 'python', display_name: 'python3' });

    const id = await createKernel(gw);
    expect(((await (await api(gw, '/api/kernels')).json()) as { id: string }[]).map((k) => k.id)).toEqual([id]);
    expect(await (await api(gw, `/api/kernels/${id}`)).json()).toMatchObject({ id, name: 'python3' });
    expect((await api(gw, `/api/kernels/${id}/interrupt`, 'POST')).status).toBe(204);
    expect((await api(gw, `/api/kernels/${id}/restart`, 'POST')).status).toBe(200);
    expect(gw.kernel(id)).toMatchObject({ interrupts: 1, restarts: 1 });
    expect((await api(gw, `/api/kernels/${id}`, 'DELETE')).status).toBe(204);
    expect((await api(gw, `/api/kernels/${id}`, 'DELETE')).status).toBe(404);
    expect((await api(gw, `/api/kernels/${id}`)).status).toBe(404);

    expect(gw.requests.map((r) => [r.route, r.auth, r.answer])).toEqual([
      ['list', 'none', 403],
      ['list', 'bad', 403],
      ['list', 'query', 200],
      ['kernelspecs', 'header', 200],
      ['create', 'header', 201],
      ['list', 'header', 200],
      ['get', 'header', 200],
      ['interrupt', 'header', 204],
      ['restart', 'header', 200],
      ['delete', 'header', 204],
      ['delete', 'header', 404],
      ['get', 'header', 404],
    ]);
    expect(JSON.stringify(gw.requests)).not.toContain(gw.token as string);
  });

  it('fails create N times with the given status, then succeeds', async () => {
    await using gw = await FakeGateway.start();
    gw.failNext('create', 503, 503);
    const post = () =>
      fetch(`${gw.baseUrl}/api/kernels`, { method: 'POST', headers: { Authorization: `token ${gw.token}` } });
    expect((await post()).status).toBe(503);
    expect((await post()).status).toBe(503);
    expect((await post()).status).toBe(201);
  });

  it('answers DELETE with a scripted sequence: a status, a hang, a reset, then the real answer', async () => {
    await using gw = await FakeGateway.start();
    const id = await createKernel(gw);
    gw.failNext('delete', 503, 'hang', 'reset');
    expect((await api(gw, `/api/kernels/${id}`, 'DELETE')).status).toBe(503);
    const hung = fetch(`${gw.baseUrl}/api/kernels/${id}`, {
      method: 'DELETE',
      headers: { Authorization: `token ${gw.token}` },
      signal: AbortSignal.timeout(200),
    });
    await expect(hung).rejects.toMatchObject({ name: 'TimeoutError' });
    await expect(api(gw, `/api/kernels/${id}`, 'DELETE')).rejects.toThrow();
    expect(gw.kernels.has(id)).toBe(true);
    expect((await api(gw, `/api/kernels/${id}`, 'DELETE')).status).toBe(204);
    expect(gw.kernels.has(id)).toBe(false);
  });

  it('can run without auth', async () => {
    await using gw = await FakeGateway.start({ token: false });
    expect(gw.token).toBeUndefined();
    expect((await fetch(`${gw.baseUrl}/api/kernelspecs`)).status).toBe(200);
  });
});

describe('FakeGateway channels', () => {
  for (const v1 of [true, false]) {
    it(`runs print(1) with busy / execute_input / stream / idle and an ok reply (${v1 ? 'v1' : 'legacy'})`, async () => {
      await using gw = await FakeGateway.start();
      const id = await createKernel(gw);
      const client = await connect(gw, id, { v1 });
      expect(client.format).toBe(v1 ? 'v1' : 'legacy');
      const info = client.request('shell', 'kernel_info_request', {});
      const infoReply = await client.next((m) => m.header.msg_type === 'kernel_info_reply');
      expect(infoReply.parent_header.msg_id).toBe(info.header.msg_id);
      expect(infoReply.content).toMatchObject({ status: 'ok', language_info: { name: 'python' } });

      const { reply, iopub, types } = await client.execute('print(1)');
      expect(reply.content).toMatchObject({ status: 'ok', execution_count: 1 });
      expect(types).toEqual(['status', 'execute_input', 'stream', 'status']);
      expect(iopub[2]?.content).toEqual({ name: 'stdout', text: '1\n' });
      expect(gw.frames.filter((f) => f.direction === 'in').map((f) => f.message?.header.msg_type)).toEqual([
        'kernel_info_request',
        'execute_request',
      ]);
      expect(gw.frames.every((f) => f.format === (v1 ? 'v1' : 'legacy'))).toBe(true);
      if (!v1) expect(gw.frames.every((f) => typeof f.raw === 'string')).toBe(true);
    });
  }

  it('keeps state between cells, shows the last expression, raises errors and clears state on restart', async () => {
    await using gw = await FakeGateway.start();
    const id = await createKernel(gw);
    const client = await connect(gw, id);
    await client.execute('x = 40 + 2');
    const shown = await client.execute('x');
    expect(shown.iopub.find((m) => m.header.msg_type === 'execute_result')?.content).toMatchObject({
      data: { 'text/plain': '42' },
      execution_count: 2,
    });
    const failed = await client.execute('1/0');
    expect(failed.reply.content).toMatchObject({ status: 'error', ename: 'ZeroDivisionError' });
    expect(failed.types).toContain('error');
    await api(gw, `/api/kernels/${id}/restart`, 'POST');
    const gone = await client.execute('x');
    expect(gone.reply.content).toMatchObject({ status: 'error', ename: 'NameError', execution_count: 1 });
  });

  it('asks for input on stdin and continues with the reply; refuses when stdin is not allowed', async () => {
    await using gw = await FakeGateway.start();
    const id = await createKernel(gw);
    const client = await connect(gw, id);
    const running = client.execute("name = input('Name? ')\nprint(name)");
    const ask = await client.next((m) => m.header.msg_type === 'input_request');
    expect(ask.channel).toBe('stdin');
    expect(ask.content).toEqual({ prompt: 'Name? ', password: false });
    client.request('stdin', 'input_reply', { value: 'Ada' });
    const { iopub } = await running;
    expect(iopub.find((m) => m.header.msg_type === 'stream')?.content.text).toBe('Ada\n');
    const refused = await client.execute("input('x')", { allow_stdin: false });
    expect(refused.reply.content).toMatchObject({ status: 'error', ename: 'StdinNotImplementedError' });
  });

  it('interrupts a hanging cell with KeyboardInterrupt, and aborts the requests queued behind it', async () => {
    await using gw = await FakeGateway.start();
    const id = await createKernel(gw);
    const client = await connect(gw, id);
    const hanging = client.execute('while True: pass');
    const queued = client.execute('print(2)');
    await client.next((m) => m.header.msg_type === 'execute_input');
    await api(gw, `/api/kernels/${id}/interrupt`, 'POST');
    expect((await hanging).reply.content).toMatchObject({ status: 'error', ename: 'KeyboardInterrupt' });
    expect((await queued).reply.content).toEqual({ status: 'aborted' });
  });

  it('a kernel that ignores interrupts keeps hanging until it is restarted', async () => {
    await using gw = await FakeGateway.start({
      script: async (ctx) => {
        ctx.ignoreInterrupts();
        ctx.stdout('stuck\n');
        await ctx.hang();
      },
    });
    const id = await createKernel(gw);
    const client = await connect(gw, id);
    const req = client.request('shell', 'execute_request', { code: 'spin' });
    await client.next((m) => m.header.msg_type === 'stream');
    await api(gw, `/api/kernels/${id}/interrupt`, 'POST');
    await api(gw, `/api/kernels/${id}/restart`, 'POST');
    expect(gw.kernel(id)).toMatchObject({ interrupts: 1, restarts: 1 });
    expect(client.messages.some((m) => m.parent_header.msg_id === req.header.msg_id && m.channel === 'shell')).toBe(
      false,
    );
  });

  it('a script can die: iopub says restarting and the cell gets no reply; die without restart removes the kernel', async () => {
    await using gw = await FakeGateway.start({
      script: (ctx) => ctx.die({ restart: ctx.code !== 'final' }),
    });
    const id = await createKernel(gw);
    const client = await connect(gw, id);
    client.request('shell', 'execute_request', { code: 'crash' });
    await client.next((m) => m.header.msg_type === 'status' && m.content.execution_state === 'restarting');
    expect(gw.kernel(id).restarts).toBe(1);
    client.request('shell', 'execute_request', { code: 'final' });
    await client.next((m) => m.header.msg_type === 'status' && m.content.execution_state === 'dead');
    expect(gw.kernels.has(id)).toBe(false);
    expect(client.messages.some((m) => m.header.msg_type === 'execute_reply')).toBe(false);
  });

  it('drops the socket after k messages and replays the buffered rest to a reconnect with the same session', async () => {
    await using gw = await FakeGateway.start({
      script: async (ctx) => {
        for (let i = 1; i <= 3; i++) ctx.stdout(`${i}\n`);
      },
    });
    const id = await createKernel(gw);
    const first = await connect(gw, id);
    gw.dropChannelsAfter(3); // busy, execute_input, first stream
    const req = first.request('shell', 'execute_request', { code: 'count' });
    expect(await first.closed).toBe(1006);
    expect(first.messages.map((m) => m.header.msg_type)).toEqual(['status', 'execute_input', 'stream']);
    const again = await connect(gw, id, { session: first.session });
    const reply = await again.next((m) => m.header.msg_type === 'execute_reply');
    expect(reply.parent_header.msg_id).toBe(req.header.msg_id);
    expect(again.messages.filter((m) => m.header.msg_type === 'stream').map((m) => m.content.text)).toEqual([
      '2\n',
      '3\n',
    ]);
    expect(gw.frames.filter((f) => f.replayed).length).toBeGreaterThan(0);
  });

  it('discards the buffer when a different session reconnects', async () => {
    await using gw = await FakeGateway.start();
    const id = await createKernel(gw);
    const first = await connect(gw, id);
    gw.dropChannelsAfter(1);
    first.request('shell', 'execute_request', { code: 'print(1)' });
    await first.closed;
    const other = await connect(gw, id);
    const { reply } = await other.execute('print(2)');
    expect(reply.content.execution_count).toBe(2);
    expect(gw.frames.some((f) => f.replayed)).toBe(false);
  });

  it('records a malformed frame from the client and keeps serving; a script can send a malformed frame', async () => {
    await using gw = await FakeGateway.start({
      script: (ctx) => {
        ctx.raw(new Uint8Array([0, 1, 2]));
        ctx.stdout('after\n');
      },
    });
    const id = await createKernel(gw);
    const client = await connect(gw, id);
    client.ws.send(new Uint8Array([255, 255]));
    const { reply, types } = await client.execute('anything');
    expect(gw.frames.find((f) => f.direction === 'in')?.error).toMatch(/too short/);
    expect(reply.content.status).toBe('ok');
    expect(types).toEqual(['status', 'execute_input', 'stream', 'status']);
    expect(client.undecodable).toHaveLength(1);
  });

  it('refuses the channels handshake without the token, and delays it on a slow server', async () => {
    const clock = new ManualClock();
    await using gw = await FakeGateway.start({ clock });
    const id = await createKernel(gw);
    const noToken = new WebSocket(`${gw.baseUrl.replace('http', 'ws')}/api/kernels/${id}/channels?session_id=s`);
    const refused = await new Promise<string>((resolve) => noToken.once('error', (e) => resolve(e.message)));
    expect(refused).toMatch(/403/);

    gw.handshakeDelayMs = 5_000;
    let connected = false;
    const pending = connect(gw, id).then((c) => {
      connected = true;
      return c;
    });
    await clock.advance(4_999);
    expect(connected).toBe(false);
    await clock.advance(1);
    await pending;
    expect(connected).toBe(true);
  });

  it('close() ends open sockets and hanging requests', async () => {
    const gw = await FakeGateway.start();
    const id = await createKernel(gw);
    const client = await connect(gw, id);
    gw.failNext('delete', 'hang');
    const hung = api(gw, `/api/kernels/${id}`, 'DELETE');
    await gw.close();
    await expect(hung).rejects.toThrow();
    expect(await client.closed).toBe(1006);
    await gw.close();
  });
});

describe('FakeGateway kernels and faults, further', () => {
  it('ends an interrupted cell with status abort and no error when the kernel answers like IRkernel', async () => {
    await using gw = await FakeGateway.start({ kernelSpecs: { ir: { language: 'R', interruptReply: 'abort' } } });
    const id = await createKernel(gw, 'ir');
    const client = await connect(gw, id);
    const running = client.execute('while True: pass');
    await client.next((m) => m.header.msg_type === 'execute_input');
    client.request('control', 'interrupt_request', {});
    const { reply, types } = await running;
    expect(reply.content).toEqual({ status: 'abort' });
    expect(types).not.toContain('error');
    expect(await client.next((m) => m.header.msg_type === 'interrupt_reply')).toMatchObject({ channel: 'control' });
  });

  it('answers kernel_info on the control channel too (the server nudge uses it)', async () => {
    await using gw = await FakeGateway.start();
    const client = await connect(gw, await createKernel(gw));
    const req = client.request('control', 'kernel_info_request', {});
    const reply = await client.next((m) => m.parent_header.msg_id === req.header.msg_id);
    expect(reply).toMatchObject({ channel: 'control', header: { msg_type: 'kernel_info_reply' } });
  });

  it('answers a fault with a custom body after a delay on the gateway clock, and refuses a handshake', async () => {
    const clock = new ManualClock();
    await using gw = await FakeGateway.start({ clock });
    gw.failNext('kernelspecs', { status: 500, body: { message: 'broken spec dir' }, delayMs: 1_000 });
    let answered: Response | undefined;
    const pending = api(gw, '/api/kernelspecs').then((r) => {
      answered = r;
    });
    await clock.advance(999);
    expect(answered).toBeUndefined();
    await clock.advance(1);
    await pending;
    expect(answered?.status).toBe(500);
    expect(await answered?.json()).toEqual({ message: 'broken spec dir' });

    const id = await createKernel(gw);
    gw.failNext('channels', 503);
    await expect(connect(gw, id)).rejects.toThrow(/503/);
    await expect(connect(gw, id)).resolves.toBeDefined();
  });

  it('speaks legacy only when configured so, and refuses a client that insists on v1', async () => {
    await using gw = await FakeGateway.start({ wireFormats: ['legacy'] });
    const id = await createKernel(gw);
    const legacy = await connect(gw, id, { v1: false });
    expect((await legacy.execute('print(3)')).reply.content.status).toBe('ok');
    expect(gw.frames.every((f) => f.format === 'legacy')).toBe(true);
    await expect(connect(gw, id, { v1: true })).rejects.toThrow();
  });

  it('runs scripts with the gateway clock: a sleep finishes only when the clock advances', async () => {
    const clock = new ManualClock();
    await using gw = await FakeGateway.start({ clock });
    const client = await connect(gw, await createKernel(gw));
    const running = client.execute("time.sleep(5)\nprint('woke')");
    await client.next((m) => m.header.msg_type === 'execute_input');
    await clock.advance(4_999);
    expect(client.messages.some((m) => m.header.msg_type === 'stream')).toBe(false);
    await clock.advance(1);
    const { iopub } = await running;
    expect(iopub.find((m) => m.header.msg_type === 'stream')?.content.text).toBe('woke\n');
  });

  it('records the create body (env, path) and every executed code on the kernel', async () => {
    await using gw = await FakeGateway.start();
    const res = await fetch(`${gw.baseUrl}/api/kernels`, {
      method: 'POST',
      headers: { Authorization: `token ${gw.token}` },
      body: JSON.stringify({ name: 'python3', path: 'work', env: { A: '1' } }),
    });
    const { id } = (await res.json()) as { id: string };
    const client = await connect(gw, id);
    const running = client.execute("getpass.getpass('Secret: ')");
    expect(await client.next((m) => m.header.msg_type === 'input_request')).toMatchObject({
      content: { prompt: 'Secret: ', password: true },
    });
    client.request('stdin', 'input_reply', { value: 'hunter2' });
    expect((await running).reply.content.status).toBe('ok');
    expect(gw.kernel(id).createBody).toEqual({ name: 'python3', path: 'work', env: { A: '1' } });
    expect(gw.kernel(id).executed).toEqual(["getpass.getpass('Secret: ')"]);
  });
});

describe('pythonConformanceCode on the default script', () => {
  it('runs every conformance snippet the way IPython would', async () => {
    await using gw = await FakeGateway.start();
    const client = await connect(gw, await createKernel(gw));
    const c = pythonConformanceCode;
    const stdout = (run: Awaited<ReturnType<ChannelsClient['execute']>>) =>
      run.iopub
        .filter((m) => m.header.msg_type === 'stream')
        .map((m) => m.content.text)
        .join('');
    expect(stdout(await client.execute(c.print('hello there')))).toBe('hello there\n');
    await client.execute(c.setVar('kw_v', 41));
    expect(stdout(await client.execute(c.printVar('kw_v')))).toBe('41\n');
    expect((await client.execute(c.raise('boom'))).reply.content).toMatchObject({
      ename: 'RuntimeError',
      evalue: 'boom',
    });
    expect(stdout(await client.execute(c.join?.([c.print('a'), c.print('b')]) ?? ''))).toBe('a\nb\n');
    const rich = await client.execute(c.richOutput?.() ?? '');
    expect(rich.iopub.find((m) => m.header.msg_type === 'display_data')?.content.data).toMatchObject({
      'text/html': '<b>kernelwarden</b>',
    });
    const asking = client.execute(c.input?.('Name? ') ?? '');
    await client.next((m) => m.header.msg_type === 'input_request');
    client.request('stdin', 'input_reply', { value: 'Ada' });
    expect(stdout(await asking)).toBe('Ada\n');
    const sleeping = client.execute(c.sleep(60_000));
    await client.next((m) => m.header.msg_type === 'execute_input' && m.content.code === c.sleep(60_000));
    await api(gw, `/api/kernels/${gw.kernel().id}/interrupt`, 'POST');
    expect((await sleeping).reply.content).toMatchObject({ ename: 'KeyboardInterrupt' });
  });
});
