import type { JupyterMessage } from '@kernelwarden/jupyter-protocol';
import { describe, expect, it } from 'vitest';
import { replayFromJournal } from './journal-resume.js';
import type { KernelJournalPage, KernelJournalQuery } from './kernel-journal.js';

function entry(i: number): KernelJournalPage['entries'][number] {
  return {
    n: [1, i],
    msg: {
      header: { msg_id: `m${i}`, msg_type: 'stream', session: 'k', username: 'u', date: '', version: '5.3' },
      parent_header: { msg_id: 'cell' },
      metadata: {},
      content: { name: 'stdout', text: `${i}\n` },
      buffers: [],
      channel: 'iopub',
    },
  };
}

function page(entries: number[], more = false, lost: KernelJournalPage['lost'] = null): KernelJournalPage {
  return { kernel_id: 'k', last: [1, 100], lost, more, entries: entries.map(entry) };
}

describe('replayFromJournal', () => {
  it('hands on what the journal holds after the last message, page by page, until it holds the newest held one', async () => {
    const queries: KernelJournalQuery[] = [];
    const answers = [page([3, 4], true), page([5, 6, 7])];
    const delivered: string[] = [];
    let t = 0;
    const replay = await replayFromJournal({
      read: async (query) => {
        queries.push(query);
        return answers.shift();
      },
      afterMsgId: 'm2',
      heldIds: () => ['m6', 'm7'],
      deliver: (msg: JupyterMessage) => delivered.push(msg.header.msg_id),
      delivered: (id) => delivered.includes(id),
      signal: new AbortController().signal,
      now: () => (t += 1_000),
    });
    expect(replay).toEqual({ resumed: true });
    expect(delivered).toEqual(['m3', 'm4', 'm5', 'm6', 'm7']);
    expect(queries[0]).toEqual({ afterMsgId: 'm2', waitForMsgId: 'm7', waitMs: 2_000 });
    expect(queries[1]).toMatchObject({ after: [1, 4] });
  });

  it('passes on the numbers the journal lost, and gives up when it has no record of the last message', async () => {
    const lost = { from: [1, 3] as [number, number], to: [1, 4] as [number, number] };
    let t = 0;
    const found = await replayFromJournal({
      read: async () => page([5], false, lost),
      afterMsgId: 'm2',
      heldIds: () => [],
      deliver: () => {},
      delivered: () => false,
      signal: new AbortController().signal,
      now: () => (t += 1_000),
    });
    expect(found).toEqual({ resumed: true, lost });
    const unknown = await replayFromJournal({
      read: async () => undefined,
      afterMsgId: 'gone',
      heldIds: () => [],
      deliver: () => {},
      delivered: () => false,
      signal: new AbortController().signal,
    });
    expect(unknown).toEqual({ resumed: false });
  });

  it('gives up within its budget when the journal never holds the newest live message, so nothing stalls', async () => {
    let t = 0;
    let reads = 0;
    const replay = await replayFromJournal({
      read: async () => {
        reads++;
        return page([]);
      },
      afterMsgId: 'm2',
      heldIds: () => ['never'],
      deliver: () => {},
      delivered: () => false,
      signal: new AbortController().signal,
      now: () => (t += 3_000),
    });
    expect(replay).toEqual({ resumed: false });
    expect(reads).toBeLessThan(10);
  });
});
