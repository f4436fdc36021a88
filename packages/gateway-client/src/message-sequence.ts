/** Where a kernel's message numbers stood at one moment: see `MessageSequence.mark()`. */
export interface SequenceMark {
  /** The kernel process's id prefix, or undefined before its first message. */
  source: string | undefined;
  /** The highest number seen from it. */
  max: number;
}

/** How far below the highest number a missing one is still remembered. */
const HOLE_WINDOW = 2048;

/**
 * Follows the numbers jupyter_client (7 and later) puts at the end of a kernel's message ids
 * (`<session>_<pid>_<n>`, one counter per kernel process for all its channels), to tell whether messages the
 * kernel sent never reached this client. jupyter_server 1.23 loses a message it hands to a socket that has just
 * died, before it starts buffering for a reconnect; no replay brings it back, but the hole in the numbers shows.
 *
 * Not every hole is a loss: replies to other clients' requests are numbered too and never reach us, so the
 * kernel consults holes only for cells that ran across a reconnect. Kernels whose ids carry no counter (IRkernel's
 * are UUIDs) are not followed.
 */
export class MessageSequence {
  #source: string | undefined;
  #max = -1;
  #holes = new Set<number>();

  /** Notes a message id sent by the kernel. */
  observe(msgId: string): void {
    const last = msgId.lastIndexOf('_');
    if (last <= 0) return;
    const n = Number(msgId.slice(last + 1));
    if (!Number.isSafeInteger(n) || n < 0) return;
    const source = msgId.slice(0, last);
    if (source !== this.#source) {
      // A new kernel process (a restart) or the first message: start over.
      this.#source = source;
      this.#max = n;
      this.#holes.clear();
      return;
    }
    if (n > this.#max) {
      const from = Math.max(this.#max + 1, n - HOLE_WINDOW);
      for (let i = from; i < n; i++) this.#holes.add(i);
      this.#max = n;
      if (this.#holes.size > HOLE_WINDOW) {
        for (const hole of this.#holes) if (hole < n - HOLE_WINDOW) this.#holes.delete(hole);
      }
    } else if (this.#holes.size > 0) {
      this.#holes.delete(n);
    }
  }

  /** A mark to pass to `missingSince` later: where the numbers of the current kernel process stand now. */
  mark(): SequenceMark {
    return { source: this.#source, max: this.#max };
  }

  /** How many numbers after `mark` (up to the highest seen) never arrived; 0 when the kernel process changed. */
  missingSince(mark: SequenceMark): number {
    if (this.#source === undefined) return 0;
    // A mark taken before any message of this kernel counts from its first message we saw.
    if (mark.source !== undefined && mark.source !== this.#source) return 0;
    let missing = 0;
    for (const hole of this.#holes) if (hole > mark.max) missing++;
    return missing;
  }
}
