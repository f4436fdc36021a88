import type { Clock, Timer } from '@kernelwarden/core';

/** A cell's first this many messages are each acknowledged at once; past that, the cell is a flood. */
export const FLOOD_AFTER_MESSAGES = 64;

/** In a flood whose reply came, how long the socket must be silent before the pong that releases the idle. */
export const QUIET_PONG_MS = 3;

/** The socket the policy acknowledges on. */
export interface PongSocket {
  /** The socket can send an unsolicited pong (the `ws` library's can; WHATWG sockets cannot). */
  readonly canPong: boolean;
  /** Sends an unsolicited pong; never throws. */
  pong(): void;
}

/** What the policy reads to decide: whether a handshake runs, and the cells in flight. */
export interface PongDemand {
  /** A `kernel_info` handshake is waiting for its answers. */
  handshaking(): boolean;
  /** The cells in flight: how many messages each received, and whether its reply came. */
  cells(): Iterable<{ readonly messages: number; readonly replied: boolean }>;
}

/** Options of `new PongPolicy()`. */
export interface PongPolicyOptions {
  /** `stallWorkaround`: when false, no pong is ever sent. */
  enabled: boolean;
  clock: Clock;
  socket: PongSocket;
  demand: PongDemand;
}

/**
 * The stall workaround: while a request is pending, received messages are answered with an unsolicited WebSocket
 * pong (RFC 6455 allows them), so the client's TCP ACK rides on a data segment instead of waiting for the
 * delayed-ACK timer — which removes the ~40 ms per-request stall of stock jupyter-server.
 *
 * When: at once during a handshake and for the first `FLOOD_AFTER_MESSAGES` messages of a pending cell (a short
 * cell's every message); messages that arrive in one read share one pong (queued in a microtask). Past that the cell
 * is a flood: no pong until its reply has come, then one whenever the socket has been silent for `QUIET_PONG_MS`. A
 * pong per read in a flood gets the server to send each next message at once, in a segment and a read of its own,
 * answered by another pong — on a 2-core machine that tripled the client's CPU on a flood of flushed lines. While a
 * flood flows, the server's Nagle coalesces it into full segments that TCP acknowledges at once anyway; a big cell
 * pays at most one delayed ACK for its reply, and the quiet pong after the reply releases the idle that Nagle holds
 * behind it. Nothing is sent when no request is pending. The hot path keeps no per-message timers.
 */
export class PongPolicy {
  readonly #opts: PongPolicyOptions;
  #queued = false;
  #quietTimer: Timer | undefined;
  #lastReceiveAt = 0;
  readonly #flush = (): void => {
    this.#queued = false;
    this.#opts.socket.pong();
  };
  readonly #onQuiet = (): void => {
    this.#quietTimer = undefined;
    const silentFor = this.#opts.clock.now() - this.#lastReceiveAt;
    if (silentFor >= QUIET_PONG_MS) {
      if (this.mode() !== false) this.#opts.socket.pong();
      return;
    }
    this.#quietTimer = this.#opts.clock.setTimer(this.#onQuiet, QUIET_PONG_MS - silentFor);
  };

  constructor(opts: PongPolicyOptions) {
    this.#opts = opts;
  }

  /**
   * How the messages just read are acknowledged: `'now'` (in this read's microtask), `'quiet'` (once the socket
   * pauses), or `false` (not at all).
   */
  mode(): 'now' | 'quiet' | false {
    const { demand } = this.#opts;
    if (demand.handshaking()) return 'now';
    let mode: 'quiet' | false = false;
    for (const cell of demand.cells()) {
      if (cell.messages < FLOOD_AFTER_MESSAGES) return 'now';
      if (cell.replied) mode = 'quiet';
    }
    return mode;
  }

  /** Call after each received message was handled. */
  received(): void {
    if (!this.#opts.enabled || !this.#opts.socket.canPong || this.#queued) return;
    const mode = this.mode();
    if (mode === 'now') {
      this.#queued = true;
      queueMicrotask(this.#flush);
    } else if (mode === 'quiet') {
      this.#lastReceiveAt = this.#opts.clock.now();
      this.#quietTimer ??= this.#opts.clock.setTimer(this.#onQuiet, QUIET_PONG_MS);
    }
  }

  /** Cancels the quiet pong (the kernel is closed). */
  stop(): void {
    this.#quietTimer?.cancel();
    this.#quietTimer = undefined;
  }
}
