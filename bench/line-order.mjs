// Checks streamed text chunk by chunk against the lines "0", "1", "2", … in O(1) memory, telling lines that never
// came (gaps, e.g. dropped by the server) apart from lines that came twice or out of order.
export class LineOrder {
  #carry = '';
  #previous = '';
  /** Lines seen. */
  count = 0;
  /** The number the next line should carry. */
  next = 0;
  /** Lines skipped over by a later number. */
  missing = 0;
  /** Lines that were not a number (e.g. a lone newline whose digits were in a message that never came). */
  garbled = 0;
  /** A line came twice or went backwards. */
  reordered = false;
  /** The first line that was not the next number: `{ line, expected, got }` (got cut to 80 chars). */
  firstAnomaly;

  feed(text) {
    const lines = (this.#carry + text).split('\n');
    this.#carry = lines.pop();
    for (const line of lines) {
      this.count++;
      const n = /^\d+$/.test(line) ? Number(line) : Number.NaN;
      if (n !== this.next && !this.firstAnomaly)
        this.firstAnomaly = { line: this.count, expected: this.next, got: line.slice(0, 80), previous: this.#previous };
      this.#previous = line.slice(0, 80);
      if (n === this.next) this.next++;
      else if (Number.isNaN(n)) this.garbled++;
      else if (n > this.next) {
        this.missing += n - this.next;
        this.next = n + 1;
      } else this.reordered = true;
    }
  }

  /** True when every expected line came once, in order. */
  complete(expected) {
    return (
      !this.reordered && this.missing === 0 && this.garbled === 0 && this.next === expected && this.count === expected
    );
  }

  describe() {
    if (this.reordered) {
      const a = this.firstAnomaly;
      return `DUPLICATED OR OUT OF ORDER: line ${a.line} was ${JSON.stringify(a.got)} after ${JSON.stringify(a.previous)}, expected ${a.expected}`;
    }
    if (!this.missing && !this.garbled) return 'in order';
    const a = this.firstAnomaly;
    return (
      `${this.missing} lines MISSING, ${this.garbled} garbled, in order otherwise ` +
      `(first: line ${a.line} was ${JSON.stringify(a.got)} after ${JSON.stringify(a.previous)}, expected ${a.expected})`
    );
  }
}
