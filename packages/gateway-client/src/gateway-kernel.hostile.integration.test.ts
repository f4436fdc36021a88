import { testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProtocolError } from './errors.js';
import { GatewayKernel, MISSING_REPLY_ENAME } from './index.js';

/**
 * A cell that uses its own kernel's session key (any cell can: it is in the kernel's connection file and in
 * `kernel.session`) to publish hand-built iopub messages whose parts have the wrong shape. The server checks the
 * signature and forwards them as they are. `parts` is a Python expression: a list of (parent_header, metadata,
 * content) triples, where `PARENT` is this cell's own request header.
 */
function forgeIopub(parts: string): string {
  return [
    'import json, uuid',
    'k = get_ipython().kernel',
    "PARENT = k.get_parent('shell')['header']",
    `for parent, metadata, content in ${parts}:`,
    "    header = dict(k.session.msg_header('display_data'), date='2026-01-01T00:00:00Z', msg_id=str(uuid.uuid4()))",
    '    frames = [json.dumps(p, default=str).encode() for p in (header, parent, metadata, content)]',
    "    k.iopub_socket.send_multipart([b'kernel.forged', b'<IDS|MSG>', k.session.sign(frames)] + frames)",
    "print('after the forged messages', flush=True)",
  ].join('\n');
}

describe.each(['v1', 'legacy'] as const)(
  'GatewayKernel against a cell that forges malformed iopub messages (real jupyter-server, %s)',
  (protocol) => {
    let kernel: GatewayKernel;
    const errors: { error: ProtocolError; cellId?: string }[] = [];

    beforeAll(async () => {
      const { baseUrl, token } = testGateway();
      kernel = await GatewayKernel.start({ gateway: { baseUrl, token }, protocol, startupTimeoutMs: 60_000 });
      kernel.on('protocol-error', (e) => errors.push(e));
      expect(kernel.protocol).toBe(protocol);
    });
    afterAll(async () => {
      await kernel?.shutdown();
    });

    it('drops and counts messages whose parent_header is null or not an object; the process, the cell and the kernel go on', async () => {
      const before = kernel.droppedMessages;
      const result = await kernel.execute(
        forgeIopub("[(None, {}, {'data': {}}), (5, {}, {'data': {}}), ([], {}, {'data': {}})]"),
        { timeoutMs: 60_000, cellId: 'forged-unnamed' },
      );
      expect(result).toMatchObject({ status: 'ok', stdout: 'after the forged messages\n' });
      expect(kernel.droppedMessages - before).toBe(3);
      expect(errors.slice(-3).map((e) => [e.error.code, e.cellId])).toEqual([
        ['PROTOCOL', undefined],
        ['PROTOCOL', undefined],
        ['PROTOCOL', undefined],
      ]);
      expect(kernel.isAlive()).toBe(true);
      expect(await kernel.execute('print(6 * 7)', { timeoutMs: 60_000 })).toMatchObject({
        status: 'ok',
        stdout: '42\n',
      });
    });

    it('settles the cell whose own header a malformed message names as a KernelProtocolError, keeping its output', async () => {
      const before = errors.length;
      const result = await kernel.execute(
        forgeIopub("[(PARENT, {}, None), (PARENT, None, {'data': {}}), (PARENT, {}, ['not', 'an', 'object'])]"),
        { timeoutMs: 60_000, cellId: 'forged-named' },
      );
      expect(result).toMatchObject({
        status: 'error',
        cellId: 'forged-named',
        stdout: 'after the forged messages\n',
        error: { ename: MISSING_REPLY_ENAME },
      });
      expect(result.error?.evalue).toMatch(/malformed message/);
      expect(errors.slice(before).map((e) => e.cellId)).toEqual(['forged-named', 'forged-named', 'forged-named']);
      expect(await kernel.execute('print(1 + 1)', { timeoutMs: 60_000 })).toMatchObject({
        status: 'ok',
        stdout: '2\n',
      });
    });
  },
);
