import type { JupyterMessage } from '@kernelwarden/jupyter-protocol';
import { ManualClock } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { Handshake } from './handshake.js';

function setup() {
  const clock = new ManualClock();
  const sent: JupyterMessage[] = [];
  const handshake = new Handshake({
    clock,
    sessionId: 's',
    send: (msg) => sent.push(msg),
    retryMs: 1000,
    nudgeMs: 250,
    nudges: 6,
  });
  return { clock, sent, handshake };
}

const info = { language_info: { name: 'python' }, status: 'ok' };

describe('Handshake', () => {
  it('re-sends kernel_info_request every retryMs until the first reply', async () => {
    const { clock, sent, handshake } = setup();
    void handshake.run();
    expect(handshake.active).toBe(true);
    expect(sent.map((m) => m.header.msg_type)).toEqual(['kernel_info_request']);
    await clock.advance(1000);
    await clock.advance(1000);
    expect(sent).toHaveLength(3);
  });

  it('ends once both a reply and an iopub message of one of its requests arrived, keeping the info', async () => {
    const { sent, handshake, clock } = setup();
    const done = handshake.run();
    const id = sent[0]!.header.msg_id;
    expect(handshake.reply(info, 'other')).toBe(false);
    expect(handshake.reply(info, id)).toBe(true);
    expect(handshake.active).toBe(true);
    handshake.iopub(id);
    await expect(done).resolves.toEqual({ language: 'python', content: info });
    expect(handshake.active).toBe(false);
    expect(handshake.info?.language).toBe('python');
    expect(clock.pendingTimers()).toBe(0);
  });

  it('nudges every nudgeMs after the reply until iopub answers, then accepts after the last nudge', async () => {
    const { sent, handshake, clock } = setup();
    let settled = false;
    const done = handshake.run().finally(() => (settled = true));
    handshake.reply(info, sent[0]!.header.msg_id);
    await clock.advance(250 * 6);
    expect(sent).toHaveLength(7);
    expect(settled).toBe(false);
    await clock.advance(250);
    await done;
    expect(sent).toHaveLength(7);
  });

  it('ends as soon as iopub answers a nudge', async () => {
    const { sent, handshake, clock } = setup();
    const done = handshake.run();
    handshake.iopub('unrelated');
    handshake.reply(info, sent[0]!.header.msg_id);
    await clock.advance(250);
    handshake.iopub(sent[1]!.header.msg_id);
    await expect(done).resolves.toMatchObject({ language: 'python' });
  });

  it("rejects with the signal's reason, and with fail()'s error", async () => {
    const { handshake, clock } = setup();
    const controller = new AbortController();
    const aborted = handshake.run(controller.signal);
    controller.abort(new Error('gave up'));
    await expect(aborted).rejects.toThrow('gave up');
    const failed = handshake.run();
    handshake.fail(new Error('kernel died'));
    await expect(failed).rejects.toThrow('kernel died');
    expect(handshake.active).toBe(false);
    expect(clock.pendingTimers()).toBe(0);
    await expect(handshake.run(AbortSignal.abort(new Error('already')))).rejects.toThrow('already');
  });
});
