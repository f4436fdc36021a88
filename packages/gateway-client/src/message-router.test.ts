import { createMessage, type JupyterMessage } from '@kernelwarden/jupyter-protocol';
import { describe, expect, it } from 'vitest';
import { testCells } from './cells.test-fixture.js';
import { Handshake } from './handshake.js';
import { type MessageTargets, routeMessage } from './message-router.js';

function setup() {
  const { clock, sequence, cells, add } = testCells();
  const handshakeSent: JupyterMessage[] = [];
  const handshake = new Handshake({
    clock,
    sessionId: 'me',
    send: (m) => handshakeSent.push(m),
    retryMs: 1000,
    nudgeMs: 250,
    nudges: 0,
  });
  const log: string[] = [];
  const targets: MessageTargets = {
    sessionId: 'me',
    sequence,
    handshake,
    cells,
    ownStatus: (state) => log.push(`own ${state}`),
    serverStatus: (state) => log.push(`server ${state}`),
    inputRequest: (cell) => log.push(`input for ${cell.cellId}`),
  };
  const cell = add('req', 'c');
  return { targets, log, cell, handshake, handshakeSent, sequence };
}

const msg = (
  channel: 'iopub' | 'shell' | 'stdin',
  type: string,
  content: Record<string, unknown>,
  parent?: string,
  session = 'kernel',
) => {
  const m = createMessage(channel, type, session, content);
  if (parent) m.parent_header = { msg_id: parent };
  return m;
};

describe('routeMessage', () => {
  it("moves the status only for this handle's own requests", () => {
    const { targets, log } = setup();
    routeMessage(msg('iopub', 'status', { execution_state: 'busy' }, 'req'), targets);
    routeMessage(msg('iopub', 'status', { execution_state: 'busy' }, 'someone-else'), targets);
    routeMessage(msg('iopub', 'status', { execution_state: 'idle' }), targets);
    expect(log).toEqual(['own busy']);
  });

  it('takes restarting and dead as the server’s, whatever their parent, and goes no further', () => {
    const { targets, log, cell } = setup();
    routeMessage(msg('iopub', 'status', { execution_state: 'restarting' }, 'req'), targets);
    routeMessage(msg('iopub', 'status', { execution_state: 'dead' }), targets);
    expect(log).toEqual(['server restarting', 'server dead']);
    expect(cell.messages).toBe(0);
  });

  it('hands iopub children and the execute_reply to their cell, input requests to stdin', async () => {
    const { targets, log, cell } = setup();
    routeMessage(msg('iopub', 'stream', { name: 'stdout', text: 'hi' }, 'req'), targets);
    routeMessage(msg('stdin', 'input_request', { prompt: '?' }, 'req'), targets);
    routeMessage(msg('stdin', 'input_request', { prompt: '?' }, 'not-a-cell'), targets);
    routeMessage(msg('shell', 'execute_reply', { status: 'ok' }, 'req'), targets);
    routeMessage(msg('iopub', 'status', { execution_state: 'idle' }, 'req'), targets);
    expect(log).toEqual(['input for c', 'own idle']);
    expect(await cell.result).toMatchObject({ status: 'ok', stdout: 'hi' });
  });

  it('hands kernel_info replies and their iopub to the handshake', async () => {
    const { targets, handshake, handshakeSent } = setup();
    const done = handshake.run();
    const id = handshakeSent[0]!.header.msg_id;
    routeMessage(msg('shell', 'kernel_info_reply', { language_info: { name: 'R' } }, id), targets);
    routeMessage(msg('iopub', 'status', { execution_state: 'idle' }, id), targets);
    await expect(done).resolves.toMatchObject({ language: 'R' });
  });

  it("numbers only the kernel's messages, not the server's own under this session", () => {
    const { targets, sequence } = setup();
    const own = msg('iopub', 'status', { execution_state: 'idle' }, undefined, 'me');
    own.header.msg_id = 'me_1_5';
    routeMessage(own, targets);
    expect(sequence.mark().source).toBeUndefined();
    const kernel = msg('iopub', 'status', { execution_state: 'idle' });
    kernel.header.msg_id = 'k_1_5';
    routeMessage(kernel, targets);
    expect(sequence.mark()).toEqual({ source: 'k_1', max: 5 });
  });
});
