import { encodeV1, type JupyterMessage, type WireFormat } from '@kernelwarden/jupyter-protocol';
import { FakeGateway, type KernelScriptContext, pythonLikeScript } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import type { ProtocolError } from './errors.js';
import { GatewayKernel } from './gateway-kernel.js';
import { MISSING_REPLY_ENAME } from './index.js';

// What a hostile kernel (or a cell that holds its kernel's session key) can put on the wire: raw frames whose parts
// have any shape. Each must end as a protocol error, never as an exception in the host process.

/** The header of the execute_request the script is answering (the newest one the gateway received). */
function requestHeader(gw: FakeGateway): JupyterMessage['header'] {
  const frame = gw.frames.findLast((f) => f.direction === 'in' && f.message?.header.msg_type === 'execute_request');
  if (!frame?.message) throw new Error('no execute_request received');
  return frame.message.header;
}

/** One iopub message with the given parts as they are, in `format` (v1 binary or legacy JSON text). */
function frame(format: WireFormat, parts: Record<string, unknown>): string | Uint8Array {
  const msg = {
    channel: 'iopub',
    header: { msg_id: `hostile-${Math.random()}`, msg_type: 'display_data', session: 'kernel', version: '5.3' },
    parent_header: {},
    metadata: {},
    content: { data: { 'text/plain': 'x' }, metadata: {} },
    ...parts,
  };
  if (format === 'legacy') return JSON.stringify({ ...msg, buffers: [] });
  return encodeV1(msg as unknown as JupyterMessage);
}

/** Frames no cell can be named for: their parent_header is not an object with a string msg_id. */
const UNNAMED: Record<string, unknown>[] = [
  { parent_header: null },
  { parent_header: 5 },
  { parent_header: [] },
  { parent_header: { msg_id: 42 } },
  { header: null, parent_header: null },
];

for (const format of ['v1', 'legacy'] as const) {
  describe(`GatewayKernel against hostile frames (${format})`, () => {
    async function setUp(script: (ctx: KernelScriptContext, gw: FakeGateway) => void | Promise<void>) {
      const holder: { gw?: FakeGateway } = {};
      const gw = await FakeGateway.start({
        wireFormats: [format],
        // Only the cell `hostile` misbehaves; every other cell runs as Python would.
        script: (ctx) => (ctx.code === 'hostile' ? script(ctx, holder.gw as FakeGateway) : pythonLikeScript(ctx)),
      });
      holder.gw = gw;
      const kernel = await GatewayKernel.start({ gateway: { baseUrl: gw.baseUrl, token: gw.token } });
      const errors: { error: ProtocolError; cellId?: string }[] = [];
      kernel.on('protocol-error', (e) => errors.push(e));
      return {
        gw,
        kernel,
        errors,
        async [Symbol.asyncDispose]() {
          await kernel.shutdown();
          await gw.close();
        },
      };
    }

    it('drops and counts messages whose parent_header is null or of the wrong shape; the cell and the next one run', async () => {
      await using t = await setUp((ctx) => {
        for (const parts of UNNAMED) ctx.raw(frame(format, parts));
        ctx.stdout('after\n');
      });
      expect(t.kernel.protocol).toBe(format);
      const result = await t.kernel.execute('hostile', { cellId: 'c1' });
      expect(result).toMatchObject({ status: 'ok', stdout: 'after\n' });
      expect(t.kernel.droppedMessages).toBe(UNNAMED.length);
      expect(t.errors).toHaveLength(UNNAMED.length);
      for (const e of t.errors) {
        expect(e.error.code).toBe('PROTOCOL');
        expect(e.cellId).toBeUndefined();
      }
      expect(t.errors[0]?.error.message).toMatch(/parent_header that is not a JSON object/);
      expect(await t.kernel.execute('print(6 * 7)')).toMatchObject({ status: 'ok', stdout: '42\n' });
      expect(t.kernel.isAlive()).toBe(true);
    });

    it('settles the cell a malformed message names as a KernelProtocolError, with its output, and the next cell runs', async () => {
      await using t = await setUp((ctx, gw) => {
        const parent = requestHeader(gw);
        ctx.stdout('before\n');
        ctx.raw(frame(format, { parent_header: parent, content: null }));
        ctx.raw(frame(format, { parent_header: parent, metadata: 'not an object' }));
        ctx.stdout('after\n');
      });
      const result = await t.kernel.execute('hostile', { cellId: 'named' });
      expect(result).toMatchObject({
        status: 'error',
        cellId: 'named',
        stdout: 'before\nafter\n',
        error: { ename: MISSING_REPLY_ENAME },
      });
      expect(result.error?.evalue).toMatch(/malformed message .*content that is not a JSON object/);
      expect(t.errors.map((e) => e.cellId)).toEqual(['named', 'named']);
      expect(t.kernel.droppedMessages).toBe(2);
      expect(await t.kernel.execute('print(1)')).toMatchObject({ status: 'ok', stdout: '1\n' });
    });

    it('treats a malformed execute_reply as a protocol error of its cell', async () => {
      await using t = await setUp((ctx, gw) => {
        const parent = requestHeader(gw);
        ctx.raw(
          frame(format, {
            channel: 'shell',
            header: { msg_id: 'bad-reply', msg_type: 'execute_reply', session: 'kernel' },
            parent_header: parent,
            content: null,
          }),
        );
      });
      const result = await t.kernel.execute('hostile', { cellId: 'bad-reply-cell', timeoutMs: 60_000 });
      expect(result).toMatchObject({ status: 'error', error: { ename: MISSING_REPLY_ENAME }, timedOut: false });
      expect(t.errors.map((e) => e.cellId)).toEqual(['bad-reply-cell']);
    });
  });
}

describe('GatewayKernel against oversized and many-buffer frames', () => {
  it('refuses a v1 frame declaring more buffers than allowed, as a protocol error of its cell', async () => {
    const holder: { gw?: FakeGateway } = {};
    await using gw = await FakeGateway.start({
      wireFormats: ['v1'],
      script: (ctx) => {
        const parent = requestHeader(holder.gw as FakeGateway);
        ctx.raw(
          encodeV1({
            channel: 'iopub',
            header: { msg_id: 'many', msg_type: 'comm_msg', session: 'k', username: '', date: '', version: '5.3' },
            parent_header: parent,
            metadata: {},
            content: {},
            buffers: Array.from({ length: 5000 }, () => new Uint8Array(0)),
          }),
        );
      },
    });
    holder.gw = gw;
    await using kernel = await GatewayKernel.start({ gateway: { baseUrl: gw.baseUrl, token: gw.token } });
    const errors: { message: string; cellId?: string }[] = [];
    kernel.on('protocol-error', (e) => errors.push({ message: e.error.message, cellId: e.cellId }));
    const result = await kernel.execute('x', { cellId: 'buffers' });
    expect(errors).toHaveLength(1);
    expect(errors[0]?.message).toMatch(/declares 5000 buffers, more than the 1024 allowed/);
    expect(errors[0]?.cellId).toBe('buffers');
    expect(kernel.droppedMessages).toBe(1);
    expect(result).toMatchObject({ status: 'error', error: { ename: MISSING_REPLY_ENAME } });
  });

  for (const format of ['v1', 'legacy'] as const) {
    it(`drops a frame over maxFrameBytes (${format}): a protocol error, the socket reopens, the kernel keeps working`, async () => {
      await using gw = await FakeGateway.start({
        wireFormats: [format],
        script: (ctx) => {
          if (ctx.code === 'big') ctx.display({ 'text/plain': 'x'.repeat(200_000) });
          ctx.stdout(`${ctx.code} done\n`);
        },
      });
      await using kernel = await GatewayKernel.start({
        gateway: { baseUrl: gw.baseUrl, token: gw.token },
        maxFrameBytes: 100_000,
        reconnect: { initialDelayMs: 1 },
        replyGraceMs: 300,
      });
      const errors: string[] = [];
      kernel.on('protocol-error', (e) => errors.push(e.error.message));
      const reconnected = new Promise<void>((resolve) => kernel.on('reconnected', () => resolve()));
      const result = await kernel.execute('big');
      await reconnected;
      expect(errors).toHaveLength(1);
      expect(errors[0]).toMatch(/more than maxFrameBytes \(100000\)/);
      expect(kernel.droppedMessages).toBe(1);
      // The frame was dropped unread; the messages behind it may have gone with the socket (ws closes it).
      expect(result).toMatchObject({ status: 'error', outputDropped: true, error: { ename: MISSING_REPLY_ENAME } });
      expect(result.outputs.filter((o) => o.type === 'display_data')).toEqual([]);
      expect(await kernel.execute('small')).toMatchObject({ status: 'ok', stdout: 'small done\n' });
    });
  }
});

describe('GatewayKernel output memory', () => {
  it('keeps at most maxOutputBytes of rich outputs in the result; onOutput sees them all', async () => {
    const MiB = 1024 * 1024;
    await using gw = await FakeGateway.start({
      script: (ctx) => {
        for (let i = 0; i < 40; i++) ctx.display({ 'image/png': 'A'.repeat(MiB) });
      },
    });
    await using kernel = await GatewayKernel.start({
      gateway: { baseUrl: gw.baseUrl, token: gw.token },
      outputCaps: { maxOutputBytes: 4 * MiB },
    });
    let streamed = 0;
    const result = await kernel.execute('images', { onOutput: (o) => o.type === 'display_data' && streamed++ });
    expect(streamed).toBe(40);
    expect(result.outputs).toHaveLength(3);
    expect(result.truncated).toBe(true);
    expect(result.status).toBe('ok');
  });
});
