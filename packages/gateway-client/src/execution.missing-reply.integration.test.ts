import { testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayKernel, MISSING_REPLY_ENAME } from './index.js';

// Run in the kernel: its next execute_reply (this cell's own) is built but never sent, as when a kernel's execute
// handler fails after running the code; every other message, the closing `status: idle` included, goes out.
const DROP_THIS_CELLS_REPLY = [
  'kernel = get_ipython().kernel',
  'send = kernel.session.send',
  'def drop_execute_reply(stream, msg_or_type, content=None, parent=None, *args, **kwargs):',
  '    if msg_or_type != "execute_reply":',
  '        return send(stream, msg_or_type, content, parent, *args, **kwargs)',
  '    kernel.session.send = send',
  '    return kernel.session.msg(msg_or_type, content, parent)',
  'kernel.session.send = drop_execute_reply',
].join('\n');

describe('GatewayKernel when ipykernel goes idle without replying (real jupyter-server)', () => {
  let kernel: GatewayKernel;
  let ipykernelMajor: number;

  beforeAll(async () => {
    const { baseUrl, token } = testGateway();
    kernel = await GatewayKernel.start({ gateway: { baseUrl, token }, startupTimeoutMs: 60_000 });
    const version = await kernel.execute('import ipykernel; print(ipykernel.__version__)', { timeoutMs: 60_000 });
    ipykernelMajor = Number(version.stdout.split('.')[0]);
  });
  afterAll(async () => {
    await kernel?.shutdown();
  });

  it('settles a cell whose reply never comes within seconds as a KernelProtocolError, not at its timeout, and the next cell runs', async () => {
    const started = performance.now();
    const result = await kernel.execute(DROP_THIS_CELLS_REPLY, { timeoutMs: 60_000, cellId: 'no-reply-cell' });
    const tookMs = performance.now() - started;
    expect(result).toMatchObject({
      status: 'error',
      cellId: 'no-reply-cell',
      timedOut: false,
      cancelled: false,
      error: { ename: MISSING_REPLY_ENAME },
    });
    expect(result.error?.evalue).toMatch(/went idle without replying/);
    // The default grace is 3 s; the bound is generous for a loaded machine, far below the 60 s timeout.
    expect(tookMs).toBeLessThan(30_000);
    expect(kernel.isAlive()).toBe(true);
    const next = await kernel.execute('print(6 * 7)', { timeoutMs: 60_000 });
    expect(next).toMatchObject({ status: 'ok', stdout: '42\n' });
  });

  it('settles a cell with a NUL character within seconds, never at its timeout, and the next cell runs', async () => {
    const started = performance.now();
    const result = await kernel.execute('x = 1\0', { timeoutMs: 60_000, cellId: 'nul-cell' });
    const tookMs = performance.now() - started;
    expect(ipykernelMajor).toBeGreaterThan(0);
    expect(result).toMatchObject({ status: 'error', cellId: 'nul-cell', timedOut: false, cancelled: false });
    if (ipykernelMajor < 7) {
      // ipykernel 6's execute handler raises on such source: it publishes busy and idle and never replies.
      expect(result.error).toMatchObject({ ename: MISSING_REPLY_ENAME });
    } else {
      // ipykernel 7 replies with the error Python raises: a ValueError in older releases, a SyntaxError in newer ones.
      expect(result.error).toMatchObject({
        ename: expect.stringMatching(/^(ValueError|SyntaxError)$/),
        evalue: expect.stringMatching(/null bytes/),
      });
    }
    expect(tookMs).toBeLessThan(30_000);
    const next = await kernel.execute('print(6 * 7)', { timeoutMs: 60_000 });
    expect(next).toMatchObject({ status: 'ok', stdout: '42\n' });
  });
});
