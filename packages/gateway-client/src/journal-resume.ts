import { decodeLegacy, type JupyterMessage } from '@kernelwarden/jupyter-protocol';
import type { JournalNumber, KernelJournalPage, KernelJournalQuery } from './kernel-journal.js';

/** Reads a kernel's journal (one page). */
export type JournalRead = (query: KernelJournalQuery, signal: AbortSignal) => Promise<KernelJournalPage | undefined>;

/** How long one read may wait for the journal to hold the newest live message. */
const WAIT_MS = 2_000;
/** Reads made before the replay gives up on catching up with the live messages. */
const MAX_ROUNDS = 100;
/**
 * The longest a replay holds the live messages back: past it the held messages go on and the kernel's own account of
 * holes stands (the cell is flagged, not stalled).
 */
const BUDGET_MS = 10_000;
/**
 * How long after the reopen the journal stays the only source of iopub messages: the server replays what it
 * buffered right after the reopen and can lose a message around that replay; past it, live messages follow the
 * journal's order without a hole.
 */
const SETTLE_MS = 500;
/** Pause between reads while the replay waits for the live stream to settle. */
const PAUSE_MS = 50;

/** What a replay from the journal did. */
export interface JournalReplay {
  /** The journal answered: what the socket missed was handed on (or `lost` says which numbers are gone). */
  resumed: boolean;
  /** Numbers that fell out of the journal's retention between the last message handed on and the replay. */
  lost?: { from: JournalNumber; to: JournalNumber };
}

/** A journal entry as a channel message; undefined when it is not one (it is then left out). */
function toMessage(entry: KernelJournalPage['entries'][number]): JupyterMessage | undefined {
  try {
    const { buffers: _buffers, ...msg } = entry.msg;
    return decodeLegacy(JSON.stringify({ ...msg, channel: 'iopub', buffers: [] }));
  } catch {
    return undefined;
  }
}

/**
 * Hands on, in order, every iopub message after `afterMsgId` (the last one handed on before the drop) from the
 * journal, while the caller holds what the reopened socket delivers: the journal stays the only source of iopub
 * messages until it holds the newest held one and `SETTLE_MS` passed since the reopen (the server's own replay, and
 * a message it may lose around it, are behind). The caller then hands on its held messages, leaving out those
 * already handed on. `resumed: false` when the journal has no record of `afterMsgId` or never catches up: the caller
 * keeps its own account of what was lost.
 */
export async function replayFromJournal(opts: {
  read: JournalRead;
  afterMsgId: string;
  /** The kernel iopub messages the reopened socket delivered so far (held back). */
  heldIds: () => readonly string[];
  /** Hands a message on unless it was already. */
  deliver: (msg: JupyterMessage) => void;
  /** Whether a message was handed on. */
  delivered: (id: string) => boolean;
  signal: AbortSignal;
  now?: () => number;
}): Promise<JournalReplay> {
  const now = opts.now ?? Date.now;
  const began = now();
  let after: JournalNumber | undefined;
  let lost: JournalReplay['lost'];
  const done = (): JournalReplay => (lost ? { resumed: true, lost } : { resumed: true });
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const newest = opts.heldIds().at(-1);
    const query: KernelJournalQuery = after === undefined ? { afterMsgId: opts.afterMsgId } : { after };
    // The journal is a subscriber of its own and may not hold yet what the socket delivered: the read waits for it.
    const waitFor = newest ?? (after === undefined ? opts.afterMsgId : undefined);
    if (waitFor !== undefined) {
      query.waitForMsgId = waitFor;
      query.waitMs = WAIT_MS;
    }
    const page = await opts.read(query, opts.signal);
    if (page === undefined) return { resumed: false };
    if (page.lost !== null && lost === undefined) lost = { from: page.lost.from, to: page.lost.to };
    for (const entry of page.entries) {
      const msg = toMessage(entry);
      if (msg !== undefined) opts.deliver(msg);
      after = entry.n;
    }
    if (page.more) continue;
    const latest = opts.heldIds().at(-1);
    const caughtUp = latest === undefined || opts.delivered(latest);
    if (caughtUp && now() - began >= SETTLE_MS) return done();
    if (now() - began >= BUDGET_MS) return { resumed: false };
    await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
  }
  return { resumed: false };
}
