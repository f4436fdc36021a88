import { decodeLegacy, type JupyterMessage } from '@kernelwarden/jupyter-protocol';
import type { JournalNumber, KernelJournalPage, KernelJournalQuery } from './kernel-journal.js';

/** Reads a kernel's journal (one page); undefined when the server answers 404. */
export type JournalRead = (query: KernelJournalQuery, signal: AbortSignal) => Promise<KernelJournalPage | undefined>;

/** How long one read waits on the server for new messages while cells run (a long poll). */
export const LONG_POLL_MS = 5_000;
/** How long one read waits while no cell runs, so that the socket can take over again soon. */
export const QUIET_POLL_MS = 250;
/** How long after the socket reopened the journal stays the source of iopub messages at least. */
export const SETTLE_MS = 1_000;
/**
 * How long a kernel iopub message the socket delivered may stay missing from the journal. The journal is a subscriber
 * on the same server as the socket: past this bound it has missed the message (it joined a restarted kernel's iopub
 * late, say), and the socket's own copies are handed on instead, flagged (`onMissed`).
 */
export const MISS_GRACE_MS = 10_000;
/** The most socket copies kept while the journal is the source (the oldest go first, counted as missed). */
export const MAX_HELD_COPIES = 10_000;
const RETRY_MIN_MS = 50;
const RETRY_MAX_MS = 1_000;

/** What a `JournalFeed` hands messages to and asks about. */
export interface JournalFeedOptions {
  read: JournalRead;
  /** Hands a kernel iopub message on (the caller drops one it handed on already). */
  deliver(msg: JupyterMessage): void;
  /** Whether the kernel iopub message with this id was handed on. */
  delivered(id: string): boolean;
  /** No cell is in flight. */
  quiet(): boolean;
  /** The socket is open (not reconnecting). */
  socketOpen(): boolean;
  /**
   * A read succeeded and accounts for every message the socket delivered: with the page it is about to hand on, every
   * iopub message up to the journal's cursor is handed on (unless `onLost` said which were not).
   */
  onCaughtUp(): void;
  /** Numbers fell out of the journal's retention before the feed read them. */
  onLost(lost: { from: JournalNumber; to: JournalNumber }): void;
  /**
   * The journal missed kernel iopub messages the socket delivered (they were not in it within `MISS_GRACE_MS`): the
   * feed stopped, the socket's copies it held were handed on, and output may have a hole.
   */
  onMissed?(): void;
  /** The journal has no record of where the feed starts: it stops, and the caller's own account of losses stands. */
  onUnavailable(): void;
  now?: () => number;
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
 * The kernel's iopub read from its journal (docs/journal-protocol.md) from the moment its channels socket dropped:
 * every message after the last one handed on, by number, in order, once — the socket's own iopub messages are
 * held meanwhile (`active`), not handed on. A socket copy the journal has not handed on within `MISS_GRACE_MS` means
 * the journal missed it: the feed stops, hands the held copies on and says so (`onMissed`); it never waits on the
 * journal for longer. Reads are long polls; a failed read is retried (the HTTP request may be cut too).
 * Once no cell is in flight, the socket is open and settled, and every iopub message it delivered was handed on, the
 * socket takes over again.
 */
export class JournalFeed {
  readonly #opts: JournalFeedOptions;
  readonly #now: () => number;
  #active = false;
  #cursor: JournalNumber | undefined;
  #afterMsgId: string | undefined;
  #socketNewest: string | undefined;
  #reopenedAt = 0;
  /** The socket's copies the journal has not handed on yet, oldest first, with when each came. */
  #held = new Map<string, { msg: JupyterMessage; at: number }>();
  #overflowed = false;

  constructor(opts: JournalFeedOptions) {
    this.#opts = opts;
    this.#now = opts.now ?? Date.now;
  }

  /** Kernel iopub messages come from the journal, not the socket. */
  get active(): boolean {
    return this.#active;
  }

  /**
   * The socket delivered kernel iopub messages the journal has not handed on: they are on their way (from the
   * journal, or from the socket's copies once `MISS_GRACE_MS` passed), so a silent socket does not mean they are lost.
   */
  get holding(): boolean {
    return this.#active && this.#held.size > 0;
  }

  /**
   * The socket dropped: reads the journal from the message after `lastIopubId` (the last kernel iopub message handed
   * on; from the journal's start when none was) until the socket can take over again, or `signal` aborts.
   */
  start(lastIopubId: string | undefined, signal: AbortSignal): void {
    this.#reopenedAt = this.#now();
    if (this.#active) return;
    this.#active = true;
    this.#socketNewest = undefined;
    this.#held.clear();
    this.#overflowed = false;
    this.#cursor = lastIopubId === undefined ? [0, 0] : undefined;
    this.#afterMsgId = lastIopubId;
    void this.#run(signal);
  }

  /** The socket reopened. */
  reopened(): void {
    this.#reopenedAt = this.#now();
  }

  /**
   * The socket delivered this kernel iopub message while the feed is active: it is not handed on from there, but held
   * until the journal hands it on (or, when the journal missed it, handed on from the socket).
   */
  socketDelivered(id: string, msg?: JupyterMessage): void {
    this.#socketNewest = id;
    if (msg === undefined || this.#held.has(id)) return;
    this.#held.set(id, { msg, at: this.#now() });
    if (this.#held.size > MAX_HELD_COPIES) {
      const oldest = this.#held.keys().next().value as string;
      this.#held.delete(oldest);
      this.#overflowed = true;
    }
  }

  /** How long until the oldest held socket copy has waited `MISS_GRACE_MS`, or undefined when none is held. */
  #graceLeft(): number | undefined {
    for (const { at } of this.#held.values()) return Math.max(0, at + MISS_GRACE_MS - this.#now());
    return undefined;
  }

  /** The journal missed messages the socket delivered: the socket takes over, its held copies handed on, flagged. */
  #fallBack(): void {
    this.#active = false;
    const held = [...this.#held.values()];
    this.#held.clear();
    this.#overflowed = false;
    for (const { msg } of held) {
      if (!this.#opts.delivered(msg.header.msg_id)) this.#opts.deliver(msg);
    }
    this.#opts.onMissed?.();
  }

  async #run(signal: AbortSignal): Promise<void> {
    let failures = 0;
    while (this.#active && !signal.aborted) {
      const grace = this.#graceLeft();
      if (grace === 0 || this.#overflowed) {
        this.#fallBack();
        return;
      }
      const quiet = this.#opts.quiet();
      const waitMs = Math.min(quiet ? QUIET_POLL_MS : LONG_POLL_MS, grace ?? Number.POSITIVE_INFINITY);
      const query: KernelJournalQuery =
        this.#cursor === undefined ? { afterMsgId: this.#afterMsgId as string } : { after: this.#cursor, waitMs };
      let page: KernelJournalPage | undefined;
      try {
        page = await this.#opts.read(query, signal);
        failures = 0;
      } catch {
        if (signal.aborted) break;
        failures++;
        await pause(Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** failures), signal);
        continue;
      }
      if (signal.aborted) break;
      if (page === undefined) {
        this.#active = false;
        // What the socket delivered meanwhile is handed on from it: the caller's own account of holes stands.
        const held = [...this.#held.values()];
        this.#held.clear();
        for (const { msg } of held) {
          if (!this.#opts.delivered(msg.header.msg_id)) this.#opts.deliver(msg);
        }
        this.#opts.onUnavailable();
        return;
      }
      if (page.lost !== null) this.#opts.onLost({ from: page.lost.from, to: page.lost.to });
      // Held copies this page hands on (or the caller took from elsewhere) leave the wait. When none is
      // left, the journal holds everything the socket delivered: that is said before the page is handed on, so that a
      // cell the page completes completes whole.
      for (const entry of page.entries) {
        const id = entry.msg.header?.msg_id;
        if (typeof id === 'string') this.#held.delete(id);
      }
      for (const id of this.#held.keys()) if (this.#opts.delivered(id)) this.#held.delete(id);
      if (this.#held.size === 0) this.#opts.onCaughtUp();
      for (const entry of page.entries) {
        this.#cursor = entry.n;
        const msg = toMessage(entry);
        if (msg !== undefined) this.#opts.deliver(msg);
      }
      // An `after_msg_id` read with nothing after that message: the journal's last number is that message's.
      if (this.#cursor === undefined) this.#cursor = page.last;
      if (page.more) continue;
      const newest = this.#socketNewest;
      if (
        this.#opts.quiet() &&
        this.#opts.socketOpen() &&
        this.#now() - this.#reopenedAt >= SETTLE_MS &&
        (newest === undefined || this.#opts.delivered(newest))
      ) {
        this.#active = false;
      }
    }
    this.#active = false;
  }
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
