import type { Clock, Timer } from '@kernelwarden/core';
import { createMessage, type JupyterMessage } from '@kernelwarden/jupyter-protocol';

/** What the kernel said about itself in its `kernel_info_reply`. */
export interface KernelInfo {
  /** `language_info.name`, e.g. `'python'` or `'R'`. */
  language: string;
  /** The whole reply content. */
  content: Record<string, unknown>;
}

/** Options of `new Handshake()`. */
export interface HandshakeOptions {
  clock: Clock;
  /** The session id requests are sent under. */
  sessionId: string;
  /** Sends a request on the channels socket. */
  send(msg: JupyterMessage): void;
  /** Interval between `kernel_info_request`s until the first reply. */
  retryMs: number;
  /** After the reply, the interval between the requests that nudge iopub. */
  nudgeMs: number;
  /** After the reply, how many nudges are sent before a kernel that publishes no status is accepted. */
  nudges: number;
}

interface Waiter {
  ids: Set<string>;
  /** A `kernel_info_reply` to one of `ids` arrived. */
  reply(content: Record<string, unknown>): void;
  /** An iopub message whose parent is one of `ids` arrived: this socket's iopub subscription is live. */
  iopub(): void;
  fail(error: unknown): void;
}

/**
 * The `kernel_info` handshake that makes a socket usable, at start, after `restart()`/`kill()` and after a server
 * auto-restart. It sends `kernel_info_request` (again every `retryMs`) until the first reply, then keeps nudging
 * (every `nudgeMs`) until iopub carries a message of one of them, like jupyter_server's own nudge. A socket opened
 * on a freshly (re)started kernel may get its shell reply before its iopub subscription reaches the kernel (ZMQ's
 * slow joiner): a cell sent then would lose its `status: idle` and never complete. jupyter_server 1.23 skips its
 * nudge after auto-restarting a kernel that died busy, so the client makes sure itself. A kernel that never
 * publishes a status for kernel_info is accepted after `nudges` nudges.
 */
export class Handshake {
  readonly #opts: HandshakeOptions;
  #waiter: Waiter | undefined;
  #info: KernelInfo | undefined;

  constructor(opts: HandshakeOptions) {
    this.#opts = opts;
  }

  /** True while a handshake runs (its requests want their answers at once: see `PongPolicy`). */
  get active(): boolean {
    return this.#waiter !== undefined;
  }

  /** The last handshake's `kernel_info_reply`. */
  get info(): KernelInfo | undefined {
    return this.#info;
  }

  /** Takes a `kernel_info_reply` (its parent `parentId`); true when it answered a request of the handshake. */
  reply(content: Record<string, unknown>, parentId: string): boolean {
    const waiter = this.#waiter;
    if (!waiter?.ids.has(parentId)) return false;
    waiter.reply(content);
    return true;
  }

  /** Notes an iopub message whose parent is `parentId`. */
  iopub(parentId: string): void {
    const waiter = this.#waiter;
    if (waiter?.ids.has(parentId)) waiter.iopub();
  }

  /** Fails the handshake in progress, if any, with `error`. */
  fail(error: unknown): void {
    this.#waiter?.fail(error);
  }

  /** Runs one handshake; resolves with the kernel's info, rejects with the signal's reason or `fail()`'s error. */
  run(signal?: AbortSignal): Promise<KernelInfo> {
    const { clock, retryMs, nudgeMs, nudges: maxNudges } = this.#opts;
    return new Promise<KernelInfo>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      let timer: Timer | undefined;
      let reply: Record<string, unknown> | undefined;
      let iopubSeen = false;
      let nudges = 0;
      const cleanup = () => {
        timer?.cancel();
        signal?.removeEventListener('abort', onAbort);
        if (this.#waiter === waiter) this.#waiter = undefined;
      };
      const onAbort = () => {
        cleanup();
        reject(signal?.reason);
      };
      const finish = () => {
        cleanup();
        const content = reply ?? {};
        const languageInfo = content.language_info as { name?: unknown } | undefined;
        this.#info = { language: String(languageInfo?.name ?? ''), content };
        resolve(this.#info);
      };
      const send = () => {
        const msg = createMessage('shell', 'kernel_info_request', this.#opts.sessionId, {});
        waiter.ids.add(msg.header.msg_id);
        this.#opts.send(msg);
      };
      const tick = () => {
        if (reply) {
          if (nudges >= maxNudges) {
            finish();
            return;
          }
          nudges++;
        }
        send();
        timer = clock.setTimer(tick, reply ? nudgeMs : retryMs);
      };
      const waiter: Waiter = {
        ids: new Set(),
        fail: (error) => {
          cleanup();
          reject(error);
        },
        reply: (content) => {
          if (reply) return;
          reply = content;
          if (iopubSeen) {
            finish();
            return;
          }
          timer?.cancel();
          timer = clock.setTimer(tick, nudgeMs);
        },
        iopub: () => {
          iopubSeen = true;
          if (reply) finish();
        },
      };
      this.#waiter = waiter;
      signal?.addEventListener('abort', onAbort, { once: true });
      tick();
    });
  }
}
