// Checks streamed text chunk by chunk against the lines "0", "1", "2", … in order, in O(1) memory.
export class LineOrder {
  #carry = '';
  next = 0;
  ok = true;

  feed(text) {
    const lines = (this.#carry + text).split('\n');
    this.#carry = lines.pop();
    for (const line of lines) {
      if (this.ok && line !== String(this.next)) this.ok = false;
      this.next++;
    }
  }
}
