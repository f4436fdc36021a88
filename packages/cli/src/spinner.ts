const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/** Where a spinner draws: a writable stream that may be a terminal. */
export interface SpinnerStream {
  isTTY?: boolean;
  write(text: string): unknown;
}

/**
 * A one-line progress indicator on stderr while something slow runs (a kernel starting).
 *
 * It draws only when `enabled` and the stream is a terminal, waits `delayMs` before the first frame so quick
 * steps do not flicker, and erases its line on `stop()`. Create one with `new Spinner(process.stderr, { enabled: !json })`.
 */
export class Spinner {
  #timer: NodeJS.Timeout | undefined;
  #delay: NodeJS.Timeout | undefined;
  #frame = 0;
  #drawn = false;
  #text = '';
  readonly #stream: SpinnerStream;
  readonly #active: boolean;
  readonly #delayMs: number;

  constructor(stream: SpinnerStream, opts: { enabled?: boolean; delayMs?: number } = {}) {
    this.#stream = stream;
    this.#active = (opts.enabled ?? true) && stream.isTTY === true;
    this.#delayMs = opts.delayMs ?? 200;
  }

  /** True when this spinner will ever draw (a terminal and not disabled). */
  get active(): boolean {
    return this.#active;
  }

  /** Starts (or retitles) the spinner. */
  start(text: string): void {
    this.#text = text;
    if (!this.#active || this.#timer || this.#delay) return;
    this.#delay = setTimeout(() => {
      this.#delay = undefined;
      this.#timer = setInterval(() => this.#draw(), 80);
      this.#timer.unref();
      this.#draw();
    }, this.#delayMs);
    this.#delay.unref();
  }

  /** Stops and erases the spinner; safe to call when it never started. */
  stop(): void {
    clearTimeout(this.#delay);
    clearInterval(this.#timer);
    this.#delay = undefined;
    this.#timer = undefined;
    if (this.#drawn) this.#stream.write('\r\x1b[2K');
    this.#drawn = false;
  }

  #draw(): void {
    const frame = FRAMES[this.#frame++ % FRAMES.length];
    this.#stream.write(`\r\x1b[2K${frame} ${this.#text}`);
    this.#drawn = true;
  }
}
