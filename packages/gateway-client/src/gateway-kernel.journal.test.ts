import { encodeV1, type JupyterMessage } from '@kernelwarden/jupyter-protocol';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  gatewayFetch,
  json,
  KernelSocket,
  lastSocket,
  resetKernelSockets,
  start,
} from './gateway-kernel.test-fixture.js';
import type { KernelJournalPage } from './kernel-journal.js';

beforeEach(resetKernelSockets);
afterEach(resetKernelSockets);

const JOURNAL = { version: 1, max_bytes: 1 << 20, max_age_ms: 60_000 };

/**
 * A gateway whose kernel `k` offers a journal, reads of which `journal` answers (undefined: the fixture's default), and
 * a scripted kernel that hands each execute_request to the returned `sent` promise's resolver. Only the start's
 * handshake publishes status (each socket has a scripted kernel of its own): a reconnect's probe is answered on shell
 * alone.
 */
function journalGateway(journal: (url: string) => Response | Promise<Response> | undefined) {
  let request!: (req: JupyterMessage) => void;
  const sent = new Promise<JupyterMessage>((r) => (request = r));
  const hook = gatewayFetch('k', (method, url) => {
    if (method === 'POST' && url.endsWith('/api/kernels'))
      return json({ id: 'k', name: 'python3', kernelwarden_journal: JOURNAL }, 201);
    if (method === 'GET' && url.endsWith('/api/kernels/k'))
      return json({ id: 'k', name: 'python3', kernelwarden_journal: JOURNAL });
    return url.includes('/api/kernels/k/journal') ? journal(url) : undefined;
  });
  let infos = 0;
  KernelSocket.script = { execute: (req) => request(req), kernelInfoStatus: () => ++infos === 1 };
  return { hook, sent };
}

/** A kernel iopub message of the cell `request`, as the kernel sent it (its own session). */
function kernelMessage(request: JupyterMessage, id: string, type: string, content: Record<string, unknown>) {
  return {
    channel: 'iopub',
    header: { ...request.header, session: 'kernel-session', msg_id: id, msg_type: type },
    parent_header: request.header,
    metadata: {},
    content,
    buffers: [],
  } as unknown as JupyterMessage;
}

describe('GatewayKernel resuming from the kernel journal (a server that offers one)', () => {
  it('waits for the journal to hand on what the socket delivered, past every grace, and settles the cell whole', async () => {
    // The journal, behind the socket: it holds the cell's messages only once `catchUp()` is called.
    let held: KernelJournalPage['entries'] = [];
    let catchUp!: () => void;
    let caughtUp = new Promise<void>((r) => (catchUp = r));
    const reads: string[] = [];
    const { hook, sent } = journalGateway((url) => {
      reads.push(new URL(url).search);
      const answer = () =>
        json({ kernel_id: 'k', last: [1, 1 + held.length], lost: null, more: false, entries: held.splice(0) });
      // A long poll: answered as soon as the journal holds something, or after a short wait with nothing.
      return Promise.race([held.length > 0 ? undefined : caughtUp, new Promise((r) => setTimeout(r, 20))]).then(answer);
    });
    using _hook = hook;
    await using kernel = await start({
      reconnect: { initialDelayMs: 1 },
      replyGraceMs: 50,
      idleGraceMs: 50,
    });
    const execution = kernel.execute('print("late")');
    const req = await sent;
    // The socket is cut before anything of the cell came; its reply never comes.
    const reconnected = new Promise<void>((r) => kernel.on('reconnected', () => r()));
    lastSocket().serverClose(1006);
    await reconnected;
    const messages = [
      kernelMessage(req, 'busy-1', 'status', { execution_state: 'busy' }),
      kernelMessage(req, 'out-1', 'stream', { name: 'stdout', text: 'late\n' }),
      kernelMessage(req, 'idle-1', 'status', { execution_state: 'idle' }),
    ];
    // The new socket delivers them; the journal, the source after a cut, has them only later.
    for (const msg of messages) lastSocket().receive(encodeV1(msg));
    await new Promise((r) => setTimeout(r, 400));
    expect(reads.length).toBeGreaterThan(0);
    held = messages.map((msg, i) => ({ n: [1, 2 + i] as [number, number], msg: msg as never }));
    catchUp();
    caughtUp = new Promise<void>(() => {});
    const result = await execution;
    expect(result).toMatchObject({ status: 'ok', stdout: 'late\n' });
    expect(result.outputDropped).toBeUndefined();
  });
});

describe('GatewayKernel with resumeFromJournal: false', () => {
  it('never reads the journal: a cut is resumed from the socket, and what went with it is flagged', async () => {
    const reads: string[] = [];
    const { hook, sent } = journalGateway((url) => {
      reads.push(url);
      return undefined;
    });
    using _hook = hook;
    await using kernel = await start({
      reconnect: { initialDelayMs: 1 },
      replyGraceMs: 50,
      idleGraceMs: 50,
      resumeFromJournal: false,
    });
    const execution = kernel.execute('print("late")');
    const req = await sent;
    const reconnected = new Promise<void>((r) => kernel.on('reconnected', () => r()));
    lastSocket().serverClose(1006);
    await reconnected;
    // The server replays what it buffered: the output and the idle, not the reply.
    lastSocket().receive(encodeV1(kernelMessage(req, 'out-1', 'stream', { name: 'stdout', text: 'late\n' })));
    lastSocket().receive(encodeV1(kernelMessage(req, 'idle-1', 'status', { execution_state: 'idle' })));
    const result = await execution;
    expect(reads).toEqual([]);
    expect(result.stdout).toBe('late\n');
    expect(result.outputDropped).toBe(true);
  });
});
