import { randomUUID } from 'node:crypto';
import { testGateway } from '@kernelwarden/test-env';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeGateway } from './fake-gateway.js';
import { ChannelsClient } from './fixtures/channels-client.js';

interface Target {
  baseUrl: string;
  token: string;
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

function rest(target: Target, path: string, method = 'GET', body?: unknown, token: string | null = target.token) {
  return fetch(`${target.baseUrl}${path}`, {
    method,
    headers: {
      ...(token ? { Authorization: `token ${token}` } : {}),
      ...(body ? { 'Content-Type': 'application/json' } : {}),
    },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
}

/** What one cell looked like on the wire: its iopub message types, reply status and the parts that matter. */
function summarize(run: Awaited<ReturnType<ChannelsClient['execute']>>) {
  const find = (type: string) => run.iopub.find((m) => m.header.msg_type === type)?.content;
  return {
    iopub: run.types,
    reply: run.reply.content.status,
    ename: run.reply.content.ename,
    stream: find('stream'),
    result: (find('execute_result') as { data?: unknown } | undefined)?.data,
  };
}

/** Drives one kernel through the scenario over the raw protocol, in one wire format, and returns what it saw. */
async function channelsScenario(target: Target, kernelId: string, v1: boolean) {
  const client = await ChannelsClient.connect(target, kernelId, { v1 });
  cleanups.push(async () => void client.ws.terminate());
  const info = client.request('shell', 'kernel_info_request', {});
  const infoReply = await client.next(
    (m) => m.parent_header.msg_id === info.header.msg_id && m.header.msg_type === 'kernel_info_reply',
  );
  const out: Record<string, unknown> = {
    format: client.format,
    kernelInfo: {
      status: infoReply.content.status,
      protocol5: String(infoReply.content.protocol_version).startsWith('5.'),
      language: (infoReply.content.language_info as { name?: string }).name,
    },
    print: summarize(await client.execute('print(1)')),
    assign: summarize(await client.execute('x = 40 + 2')),
    expression: summarize(await client.execute('x')),
    error: summarize(await client.execute('1/0')),
  };

  const asking = client.execute("name = input('Name? ')\nprint(name)");
  const ask = await client.next((m) => m.header.msg_type === 'input_request');
  client.request('stdin', 'input_reply', { value: 'Ada' });
  out.stdin = { channel: ask.channel, content: ask.content, cell: summarize(await asking) };

  const hanging = client.execute("print('started')\nwhile True: pass");
  await client.next((m) => m.header.msg_type === 'stream' && m.content.text === 'started\n');
  out.interruptStatus = (await rest(target, `/api/kernels/${kernelId}/interrupt`, 'POST')).status;
  out.interrupted = summarize(await hanging);

  if (!v1) {
    const legacy = client.textFrames.map((t) =>
      Object.keys(JSON.parse(t) as object)
        .sort()
        .join(','),
    );
    out.legacyFrameKeys = [...new Set(legacy)];
  }
  client.ws.close();
  await client.closed;
  return out;
}

async function scenario(target: Target) {
  const out: Record<string, unknown> = {};
  const specs = (await (await rest(target, '/api/kernelspecs')).json()) as { kernelspecs: Record<string, unknown> };
  out.hasPython3 = 'python3' in specs.kernelspecs;
  out.noToken = (await rest(target, '/api/kernels', 'GET', undefined, null)).status;
  out.unknownKernel = (await rest(target, `/api/kernels/${randomUUID()}`)).status;

  const created = await rest(target, '/api/kernels', 'POST', { name: 'python3' });
  const model = (await created.json()) as Record<string, unknown>;
  const id = String(model.id);
  cleanups.push(async () => void (await rest(target, `/api/kernels/${id}`, 'DELETE')));
  out.create = {
    status: created.status,
    keys: ['connections', 'execution_state', 'id', 'last_activity', 'name'].every((k) => k in model),
  };
  out.listed = ((await (await rest(target, '/api/kernels')).json()) as { id: string }[]).some((k) => k.id === id);

  out.v1 = await channelsScenario(target, id, true);
  out.legacy = await channelsScenario(target, id, false);

  const restart = await rest(target, `/api/kernels/${id}/restart`, 'POST');
  out.restartStatus = restart.status;
  const after = await ChannelsClient.connect(target, id);
  cleanups.push(async () => void after.ws.terminate());
  out.afterRestart = summarize(await after.execute('x'));
  after.ws.close();
  await after.closed;

  out.deleteStatus = (await rest(target, `/api/kernels/${id}`, 'DELETE')).status;
  out.getAfterDelete = (await rest(target, `/api/kernels/${id}`)).status;
  return out;
}

describe('FakeGateway answers like the real jupyter-server', () => {
  it('runs the same raw-protocol scenario on both and sees the same answers', { timeout: 120_000 }, async () => {
    await using fake = await FakeGateway.start();
    const onFake = await scenario({ baseUrl: fake.baseUrl, token: fake.token as string });
    const onReal = await scenario(testGateway());
    expect(onFake).toEqual(onReal);
    // And the shared answers are the ones the protocol promises.
    expect(onReal).toMatchObject({
      hasPython3: true,
      noToken: 403,
      unknownKernel: 404,
      create: { status: 201, keys: true },
      v1: {
        format: 'v1',
        print: {
          iopub: ['status', 'execute_input', 'stream', 'status'],
          reply: 'ok',
          stream: { name: 'stdout', text: '1\n' },
        },
        expression: { result: { 'text/plain': '42' } },
        error: { reply: 'error', ename: 'ZeroDivisionError' },
        stdin: { channel: 'stdin', content: { prompt: 'Name? ', password: false } },
        interruptStatus: 204,
        interrupted: { reply: 'error', ename: 'KeyboardInterrupt' },
      },
      legacy: { format: 'legacy' },
      restartStatus: 200,
      afterRestart: { reply: 'error', ename: 'NameError' },
      deleteStatus: 204,
      getAfterDelete: 404,
    });
  });
});
