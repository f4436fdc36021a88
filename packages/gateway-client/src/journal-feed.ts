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
  /** A read succeeded: every iopub message up to the journal's cursor was handed on (unless `onLost` said which were not). */
  onCaughtUp(): void;
  /** Numbers fell out of the journal's retention before the feed read them. */
  onLost(lost: { from: JournalNumber; to: JournalNumber }): void;
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
 * ignored meanwhile (`active`). Reads are long polls; a failed read is retried (the HTTP request may be cut too).
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

  constructor(opts: JournalFeedOptions) {
    this.#opts = opts;
    this.#now = opts.now ?? Date.now;
  }

  /** Kernel iopub messages come from the journal, not the socket. */
  get active(): boolean {
    return this.#active;
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
    this.#cursor = lastIopubId === undefined ? [0, 0] : undefined;
    this.#afterMsgId = lastIopubId;
    void this.#run(signal);
  }

  /** The socket reopened. */
  reopened(): void {
    this.#reopenedAt = this.#now();
  }

  /** The socket delivered this kernel iopub message while the feed is active (it is not handed on from there). */
  socketDelivered(id: string): void {
    this.#socketNewest = id;
  }

  async #run(signal: AbortSignal): Promise<void> {
    let failures = 0;
    while (this.#active && !signal.aborted) {
      const quiet = this.#opts.quiet();
      const query: KernelJournalQuery =
        this.#cursor === undefined
          ? { afterMsgId: this.#afterMsgId as string }
          : { after: this.#cursor, waitMs: quiet ? QUIET_POLL_MS : LONG_POLL_MS };
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
        this.#opts.onUnavailable();
        return;
      }
      if (page.lost !== null) this.#opts.onLost({ from: page.lost.from, to: page.lost.to });
      for (const entry of page.entries) {
        this.#cursor = entry.n;
        const msg = toMessage(entry);
        if (msg !== undefined) this.#opts.deliver(msg);
      }
      // An `after_msg_id` read with nothing after that message: the journal's last number is that message's.
      if (this.#cursor === undefined) this.#cursor = page.last;
      this.#opts.onCaughtUp();
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
