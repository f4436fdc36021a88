import { createMessage, type JupyterMessage } from '@kernelwarden/jupyter-protocol';
import { describe, expect, it } from 'vitest';
import { testCell } from './cells.test-fixture.js';
import { answerInputRequest } from './stdin-reply.js';

const cell = (onInput?: () => string | Promise<string>) => testCell('m', { opts: onInput ? { onInput } : {} });
const request = createMessage('stdin', 'input_request', 'kernel', { prompt: 'name? ', password: false });

function channel(alive = true) {
  const sent: JupyterMessage[] = [];
  return { sent, to: { sessionId: 's', alive: () => alive, send: (msg: JupyterMessage) => sent.push(msg) } };
}

describe('answerInputRequest', () => {
  it("answers with onInput's value, as a child of the request, and records that stdin was requested", async () => {
    const c = cell(() => 'Ada');
    const { sent, to } = channel();
    await answerInputRequest(c, request, to);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ channel: 'stdin', content: { value: 'Ada' } });
    expect(sent[0]?.parent_header.msg_id).toBe(request.header.msg_id);
    c.complete();
    expect((await c.result).stdinRequested).toBe(true);
  });

  it("answers '' when onInput throws or is absent", async () => {
    for (const c of [
      cell(() => {
        throw new Error('no');
      }),
      cell(),
    ]) {
      const { sent, to } = channel();
      await answerInputRequest(c, request, to);
      expect(sent[0]?.content).toEqual({ value: '' });
    }
  });

  it('drops an answer that comes after the cell settled or the kernel went away', async () => {
    let release!: (v: string) => void;
    const c = cell(() => new Promise<string>((r) => (release = r)));
    const { sent, to } = channel();
    const answering = answerInputRequest(c, request, to);
    c.abort({ cancelled: true });
    release('late');
    await answering;
    const dead = channel(false);
    await answerInputRequest(
      cell(() => 'x'),
      request,
      dead.to,
    );
    expect([sent.length, dead.sent.length]).toEqual([0, 0]);
  });
});
