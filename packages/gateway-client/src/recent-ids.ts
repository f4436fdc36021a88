// The kernel message ids a channels socket handed on lately, to drop what a reconnect replays.

/** How many message ids are remembered to drop replayed duplicates. */
export const DEDUPE_WINDOW = 4096;

/** The last `DEDUPE_WINDOW` message ids remembered; the oldest is forgotten as a new one comes. */
export class RecentIds {
  #seen = new Set<string>();
  #ring: string[] = new Array<string>(DEDUPE_WINDOW);
  #ringAt = 0;

  /** Whether `id` is remembered. */
  has(id: string): boolean {
    return this.#seen.has(id);
  }

  /** Remembers a kernel message id for de-duplication; false when it was seen already. */
  remember(id: string): boolean {
    if (this.#seen.has(id)) return false;
    const evicted = this.#ring[this.#ringAt];
    if (evicted !== undefined) this.#seen.delete(evicted);
    this.#ring[this.#ringAt] = id;
    this.#ringAt = (this.#ringAt + 1) % DEDUPE_WINDOW;
    this.#seen.add(id);
    return true;
  }

  /** Forgets every id. */
  clear(): void {
    this.#seen.clear();
    this.#ring = new Array<string>(DEDUPE_WINDOW);
    this.#ringAt = 0;
  }
}
