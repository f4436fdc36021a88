/**
 * Keeps the head and the tail of a text that may grow without bound (a cell printing 200,000 lines), in bounded
 * memory, and renders it with one line saying how much was cut from the middle.
 *
 * Push chunks in arrival order; `render()` any time.
 */
export class HeadTailText {
  readonly #limit: number;
  readonly #headLimit: number;
  readonly #tailLimit: number;
  #head = '';
  #tail = '';
  #total = 0;
  #totalLines = 0;
  #last = '';

  /** `limit` is the most characters `render()` returns, not counting the cut notice. */
  constructor(limit: number) {
    this.#limit = Math.max(0, Math.floor(limit));
    this.#headLimit = Math.ceil(this.#limit / 2);
    this.#tailLimit = this.#limit - this.#headLimit;
  }

  /** Characters pushed so far. */
  get length(): number {
    return this.#total;
  }

  /** True when nothing was pushed yet, or the last character pushed is a newline. */
  get atLineStart(): boolean {
    return this.#last === '' || this.#last === '\n';
  }

  /** True when more was pushed than `render()` can show. */
  get cut(): boolean {
    return this.#total > this.#limit;
  }

  push(text: string): void {
    if (text.length === 0) return;
    this.#total += text.length;
    this.#last = text[text.length - 1]!;
    this.#totalLines += countLines(text);
    let rest = text;
    if (this.#head.length < this.#headLimit) {
      const room = this.#headLimit - this.#head.length;
      this.#head += rest.slice(0, room);
      rest = rest.slice(room);
    }
    if (rest.length === 0 || this.#tailLimit === 0) return;
    // Amortised: let the tail grow to twice its size before trimming, so each character is copied O(1) times.
    this.#tail += rest;
    if (this.#tail.length > this.#tailLimit * 2) this.#tail = this.#tail.slice(-this.#tailLimit);
  }

  /** The whole text when it fits; else its head, a line saying what was cut, and its tail. */
  render(): string {
    if (this.#total <= this.#limit) return this.#head + this.#tail;
    const tail = this.#tail.slice(-this.#tailLimit);
    const cutChars = this.#total - this.#head.length - tail.length;
    const cutLines = Math.max(0, this.#totalLines - countLines(this.#head) - countLines(tail));
    const notice =
      `[… ${cutChars.toLocaleString('en-US')} characters (${cutLines.toLocaleString('en-US')} lines) cut from the ` +
      `middle of ${this.#total.toLocaleString('en-US')}: the output cap is ${this.#limit.toLocaleString('en-US')} characters …]`;
    const before = this.#head.endsWith('\n') || this.#head.length === 0 ? '' : '\n';
    return `${this.#head}${before}${notice}\n${tail}`;
  }
}

function countLines(text: string): number {
  let n = 0;
  let i = text.indexOf('\n');
  while (i !== -1) {
    n++;
    i = text.indexOf('\n', i + 1);
  }
  return n;
}
