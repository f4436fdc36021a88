import type { Clock, Timer } from '@kernelwarden/core';

/** The socket the heartbeat watches (the channel's). */
export interface HeartbeatSocket {
  /** The socket implementation can ping (the `ws` library's can; WHATWG sockets cannot). */
  readonly canPing: boolean;
  /** The socket is open (not reconnecting, not closed). */
  readonly isOpen: boolean;
  /** Clock time of the last message or pong received (or of the socket's open). */
  readonly lastHeardAt: number;
  /** Clock time of a ping nothing answered yet; cleared by anything heard. */
  readonly pingSentAt: number | undefined;
  /** Sends a ping and records `pingSentAt`. */
  ping(): void;
  /** Terminates a socket taken for hung and reopens it like a dropped one. */
  dropHung(cause: Error): void;
}

/** Options of `new Heartbeat()`. */
export interface HeartbeatOptions {
  clock: Clock;
  /** How long a socket may be silent before it is pinged, and the ping unanswered before it is dropped; `0`: off. */
  silentMs: number;
  socket: HeartbeatSocket;
  /** True while cells are in flight: the heartbeat only watches then. */
  busy(): boolean;
}

/**
 * Notices a connection that hangs without closing (half-open TCP, a stalled proxy): nothing arrives and no close
 * event ever comes, so pending cells would wait for their timeout. While cells are in flight, a socket silent for
 * `silentMs` (counted from the last message, pong or open, and at most from when the cells started) is pinged; if
 * neither the pong nor any message arrives within `silentMs` more, it is taken for hung and reopened (same session id:
 * the server replays what it buffered). jupyter-server answers pings itself, so a long silent cell on a healthy
 * connection costs one ping per `silentMs`. It has its own timer, due exactly when the next check is: nothing per
 * message.
 */
export class Heartbeat {
  readonly #opts: HeartbeatOptions;
  #timer: Timer | undefined;
  /** When the current busy period started: silence before it is not the cells'. */
  #watchingSince = 0;

  constructor(opts: HeartbeatOptions) {
    this.#opts = opts;
  }

  /** True while its timer is armed. */
  get armed(): boolean {
    return this.#timer !== undefined;
  }

  /** Starts watching, when it can ping and is not watching already (call when a cell is added). */
  schedule(): void {
    const { silentMs, socket, clock } = this.#opts;
    if (this.#timer || silentMs <= 0 || !socket.canPing) return;
    this.#watchingSince = clock.now();
    this.#arm();
  }

  /** Stops watching. */
  stop(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  /** One check: pings a silent socket, drops one whose ping went unanswered. */
  check(): void {
    const { silentMs, socket, clock } = this.#opts;
    if (!socket.isOpen) return;
    const now = clock.now();
    const pingSentAt = socket.pingSentAt;
    if (pingSentAt !== undefined) {
      if (now - pingSentAt >= silentMs) {
        socket.dropHung(new Error(`the channels WebSocket answered no ping for ${silentMs} ms`));
      }
      return;
    }
    if (now - this.#silentSince() >= silentMs) socket.ping();
  }

  #silentSince(): number {
    return Math.max(this.#opts.socket.lastHeardAt, this.#watchingSince);
  }

  #arm(): void {
    const { silentMs, socket, clock } = this.#opts;
    const now = clock.now();
    const pingSentAt = socket.pingSentAt;
    const due = !socket.isOpen
      ? now + silentMs
      : pingSentAt !== undefined
        ? pingSentAt + silentMs
        : this.#silentSince() + silentMs;
    this.#timer = clock.setTimer(() => this.#tick(), Math.max(1, due - now));
  }

  #tick(): void {
    this.#timer = undefined;
    if (!this.#opts.busy()) return;
    this.check();
    this.#arm();
  }
}
