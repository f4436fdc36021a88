import type { JupyterMessage } from '@kernelwarden/jupyter-protocol';
import { describe, expect, it } from 'vitest';
import { JournalFeed, type JournalFeedOptions, LONG_POLL_MS, MISS_GRACE_MS, QUIET_POLL_MS } from './journal-feed.js';
import type { JournalNumber, KernelJournalPage, KernelJournalQuery } from './kernel-journal.js';

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
  const last: JournalNumber = [1, entries.at(-1) ?? 2];
  return { kernel_id: 'k', last: [...last], lost, more, entries: entries.map(entry) };
}

/** A feed over scripted answers; resolves once it stopped on its own. */
function feed(answers: (KernelJournalPage | undefined | Error)[], overrides: Partial<JournalFeedOptions> = {}) {
  const queries: KernelJournalQuery[] = [];
  const delivered: string[] = [];
  const events: string[] = [];
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => {
    stop = resolve;
  });
  const controller = new AbortController();
  const journal = new JournalFeed({
    read: async (query) => {
      queries.push(query);
      const answer = answers.shift();
      if (answers.length === 0 && answer === undefined) stop();
      if (answer instanceof Error) throw answer;
      if (answer === undefined && answers.length === 0 && queries.length > 50) controller.abort();
      return answer;
    },
    deliver: (msg: JupyterMessage) => {
      if (!delivered.includes(msg.header.msg_id)) delivered.push(msg.header.msg_id);
    },
    delivered: (id) => delivered.includes(id),
    quiet: () => false,
    socketOpen: () => true,
    onCaughtUp: () => events.push('caught-up'),
    onLost: (lost) => events.push(`lost ${lost.from.join('.')}-${lost.to.join('.')}`),
    onUnavailable: () => {
      events.push('unavailable');
      stop();
    },
    now: () => 0,
    ...overrides,
  });
  return { journal, queries, delivered, events, stopped, controller };
}

describe('JournalFeed', () => {
  it('reads after the last message handed on, then by number in long polls, every message once, in order', async () => {
    const f = feed([page([3, 4], true), page([5, 6]), page([7]), undefined]);
    f.journal.start('m2', f.controller.signal);
    expect(f.journal.active).toBe(true);
    await f.stopped;
    f.controller.abort();
    expect(f.delivered).toEqual(['m3', 'm4', 'm5', 'm6', 'm7']);
    expect(f.queries[0]).toEqual({ afterMsgId: 'm2' });
    expect(f.queries[1]).toEqual({ after: [1, 4], waitMs: LONG_POLL_MS });
    expect(f.queries[2]).toEqual({ after: [1, 6], waitMs: LONG_POLL_MS });
    expect(f.events.filter((e) => e === 'caught-up').length).toBeGreaterThanOrEqual(3);
  });

  it('retries a read that failed (the request was cut too) and goes on from where it was', async () => {
    const f = feed([page([3]), new Error('socket hang up'), new Error('reset'), page([4]), undefined]);
    f.journal.start('m2', f.controller.signal);
    await f.stopped;
    f.controller.abort();
    expect(f.delivered).toEqual(['m3', 'm4']);
    expect(f.queries.slice(1, 4).map((q) => q.after)).toEqual([
      [1, 3],
      [1, 3],
      [1, 3],
    ]);
  });

  it('says which numbers the journal lost, and stops when it has no record of where it starts', async () => {
    const lost = { from: [1, 3] as [number, number], to: [1, 4] as [number, number] };
    const f = feed([page([5], false, lost), undefined]);
    f.journal.start('m2', f.controller.signal);
    await f.stopped;
    for (let i = 0; i < 100 && f.journal.active; i++) await new Promise((resolve) => setTimeout(resolve, 1));
    expect(f.events).toContain('lost 1.3-1.4');
    expect(f.events.at(-1)).toBe('unavailable');
    expect(f.journal.active).toBe(false);
  });

  it('hands iopub back to the socket once nothing runs and every message the socket delivered was handed on', async () => {
    let now = 0;
    const answers = [page([3]), page([4]), page([5]), page([6])];
    const f = feed(answers, { quiet: () => true, now: () => now });
    f.journal.start('m2', f.controller.signal);
    f.journal.socketDelivered('m5');
    now = 5_000;
    f.journal.reopened();
    now = 10_000;
    for (let i = 0; i < 100 && f.journal.active; i++) await new Promise((resolve) => setTimeout(resolve, 1));
    expect(f.journal.active).toBe(false);
    expect(f.delivered).toEqual(['m3', 'm4', 'm5']);
    expect(f.queries.at(-1)?.waitMs).toBe(QUIET_POLL_MS);
    f.controller.abort();
  });

  it('starts from the journal’s beginning when no kernel message was handed on yet', async () => {
    const f = feed([page([1, 2]), undefined]);
    f.journal.start(undefined, f.controller.signal);
    await f.stopped;
    f.controller.abort();
    expect(f.queries[0]).toEqual({ after: [0, 0], waitMs: LONG_POLL_MS });
    expect(f.delivered).toEqual(['m1', 'm2']);
  });

  it('hands the socket’s copies on, flagged, when the journal misses a message (a cell’s idle) past the grace', async () => {
    let now = 0;
    const queries: KernelJournalQuery[] = [];
    const delivered: string[] = [];
    const events: string[] = [];
    const controller = new AbortController();
    const idle = { ...entry(4).msg, header: { ...entry(4).msg.header, msg_type: 'status' } };
    const journal = new JournalFeed({
      // The journal holds m3, then never anything past it: it missed the cell's idle (m4).
      read: async (query) => {
        queries.push(query);
        await new Promise((resolve) => setTimeout(resolve, 1));
        now += query.waitMs ?? 0;
        return queries.length === 1 ? page([3]) : { ...page([]), last: [1, 3] };
      },
      deliver: (msg: JupyterMessage) => {
        if (!delivered.includes(msg.header.msg_id)) delivered.push(msg.header.msg_id);
      },
      delivered: (id) => delivered.includes(id),
      quiet: () => false,
      socketOpen: () => true,
      onCaughtUp: () => events.push('caught-up'),
      onLost: () => events.push('lost'),
      onMissed: () => events.push('missed'),
      onUnavailable: () => events.push('unavailable'),
      now: () => now,
    });
    journal.start('m2', controller.signal);
    journal.socketDelivered('m3', { ...entry(3).msg, channel: 'iopub' } as unknown as JupyterMessage);
    journal.socketDelivered('m4', { ...idle, channel: 'iopub' } as unknown as JupyterMessage);
    for (let i = 0; i < 500 && journal.active; i++) await new Promise((resolve) => setTimeout(resolve, 1));
    controller.abort();
    expect(journal.active).toBe(false);
    expect(delivered).toEqual(['m3', 'm4']);
    expect(events).toContain('missed');
    expect(events).not.toContain('unavailable');
    // No read waited past the grace the socket's copy had left.
    expect(queries.slice(1).every((q) => (q.waitMs ?? 0) <= MISS_GRACE_MS)).toBe(true);
    expect(now).toBeGreaterThanOrEqual(MISS_GRACE_MS);
  });

  it('says it caught up before it hands on the page that accounts for every held copy (a cell it completes is whole)', async () => {
    const order: string[] = [];
    const { journal, queries, controller } = feed([page([3, 4]), { ...page([]), last: [1, 4] }], {
      deliver: (msg: JupyterMessage) => order.push(`deliver ${msg.header.msg_id}`),
      delivered: (id) => order.includes(`deliver ${id}`),
      quiet: () => true,
      onCaughtUp: () => order.push('caught-up'),
    });
    journal.start('m2', controller.signal);
    // The socket is ahead: it delivered m4 (the cell's idle, say) before the journal's page with it came.
    journal.socketDelivered('m4', { ...entry(4).msg, channel: 'iopub' } as unknown as JupyterMessage);
    for (let i = 0; i < 200 && queries.length < 2; i++) await new Promise((resolve) => setTimeout(resolve, 1));
    controller.abort();
    expect(order.slice(0, 3)).toEqual(['caught-up', 'deliver m3', 'deliver m4']);
  });

  it('waits no longer for a socket copy the journal hands on within the grace, and flags nothing', async () => {
    let now = 0;
    const delivered: string[] = [];
    const events: string[] = [];
    const controller = new AbortController();
    let reads = 0;
    const journal = new JournalFeed({
      read: async () => {
        reads++;
        await new Promise((resolve) => setTimeout(resolve, 1));
        now += 100;
        return reads === 1 ? page([3]) : reads === 2 ? page([4]) : { ...page([]), last: [1, 4] };
      },
      deliver: (msg: JupyterMessage) => {
        if (!delivered.includes(msg.header.msg_id)) delivered.push(msg.header.msg_id);
      },
      delivered: (id) => delivered.includes(id),
      quiet: () => true,
      socketOpen: () => true,
      onCaughtUp: () => events.push('caught-up'),
      onLost: () => events.push('lost'),
      onMissed: () => events.push('missed'),
      onUnavailable: () => events.push('unavailable'),
      now: () => now,
    });
    journal.start('m2', controller.signal);
    journal.socketDelivered('m4', { ...entry(4).msg, channel: 'iopub' } as unknown as JupyterMessage);
    // The socket's copy is on its way: a silent socket does not mean it was lost.
    expect(journal.holding).toBe(true);
    for (let i = 0; i < 500 && journal.active; i++) await new Promise((resolve) => setTimeout(resolve, 1));
    controller.abort();
    expect(journal.active).toBe(false);
    expect(journal.holding).toBe(false);
    expect(delivered).toEqual(['m3', 'm4']);
    expect(events).not.toContain('missed');
  });
});
