import { type Clock, type Output, stripAnsi, type Timer } from '@kernelwarden/core';

/** One progress report: a counter that only goes up, and what happened since the last one. */
export interface ProgressUpdate {
  progress: number;
  message: string;
}

/** Most characters of new output one progress message carries (the latest ones). */
const MAX_MESSAGE_CHARS = 2_000;

/**
 * Turns a running cell's outputs into progress reports: new output at most every `intervalMs` (the latest
 * characters of it), and a heartbeat after `heartbeatMs` of silence, so that a client that resets its request
 * timeout on progress never gives up on a long cell.
 *
 * `start()` it when the cell starts, feed it `onOutput`, and `stop()` it when the cell settles.
 */
export class ProgressReporter {
  readonly #send: (update: ProgressUpdate) => void;
  readonly #clock: Clock;
  readonly #intervalMs: number;
  readonly #heartbeatMs: number;
  #progress = 0;
  #pending = '';
  #lastSentAt = 0;
  #startedAt = 0;
  #flushTimer: Timer | undefined;
  #heartbeat: Timer | undefined;
  #stopped = false;

  constructor(send: (update: ProgressUpdate) => void, opts: { clock: Clock; intervalMs: number; heartbeatMs: number }) {
    this.#send = send;
    this.#clock = opts.clock;
    this.#intervalMs = opts.intervalMs;
    this.#heartbeatMs = opts.heartbeatMs;
  }

  start(): void {
    this.#startedAt = this.#clock.now();
    this.#lastSentAt = this.#startedAt;
    this.#armHeartbeat();
  }

  readonly onOutput = (output: Output): void => {
    if (this.#stopped) return;
    if (output.type === 'stream') this.#add(stripAnsi(output.text));
    else if (output.type === 'error') this.#add(`${output.ename}: ${stripAnsi(output.evalue)}\n`);
    else if (Object.keys(output.data).some((type) => type.startsWith('image/'))) this.#add('[image]\n');
    else if (typeof output.data['text/plain'] === 'string') this.#add(`${stripAnsi(output.data['text/plain'])}\n`);
  };

  /** Sends `message` at once, after any output still waiting to be sent. */
  note(message: string): void {
    if (this.#stopped) return;
    this.#flushTimer?.cancel();
    this.#flushTimer = undefined;
    this.#flush();
    this.#emit(message);
  }

  /** Cancels every timer; nothing is sent after it. */
  stop(): void {
    this.#stopped = true;
    this.#flushTimer?.cancel();
    this.#heartbeat?.cancel();
    this.#flushTimer = undefined;
    this.#heartbeat = undefined;
  }

  #add(text: string): void {
    if (text.length === 0) return;
    this.#pending = (this.#pending + text).slice(-MAX_MESSAGE_CHARS);
    if (this.#flushTimer) return;
    const wait = this.#lastSentAt + this.#intervalMs - this.#clock.now();
    if (wait <= 0) this.#flush();
    else
      this.#flushTimer = this.#clock.setTimer(() => {
        this.#flushTimer = undefined;
        this.#flush();
      }, wait);
  }

  #flush(): void {
    if (this.#stopped || this.#pending.length === 0) return;
    const message = this.#pending;
    this.#pending = '';
    this.#emit(message);
  }

  #emit(message: string): void {
    this.#progress += 1;
    this.#lastSentAt = this.#clock.now();
    this.#armHeartbeat();
    this.#send({ progress: this.#progress, message });
  }

  #armHeartbeat(): void {
    this.#heartbeat?.cancel();
    this.#heartbeat = this.#clock.setTimer(() => {
      this.#heartbeat = undefined;
      if (this.#stopped) return;
      const seconds = Math.round((this.#clock.now() - this.#startedAt) / 1000);
      this.#emit(`still running (${seconds}s)`);
    }, this.#heartbeatMs);
  }
}
