import { InvalidOptionsError } from '@kernelwarden/core';
import type { KernelShutdowns } from './kernel-shutdowns.js';
import type { SupervisedKernel } from './lease.js';
import type { KernelFactory } from './slot-supervisor.js';
import { SpareSet, type SparesOptions, type SparesStatus } from './spare-set.js';

/**
 * The supervisor's spare sets, one per slot and key. Their kernels are handed over and shut down through the
 * supervisor's `KernelShutdowns`, so a spare kernel is shut down once too.
 *
 * Internal to the supervisor.
 */
export class Spares<K extends SupervisedKernel> {
  readonly #spares = new Map<string, SpareSet<K>>();
  readonly #shutdowns: KernelShutdowns<K>;

  constructor(shutdowns: KernelShutdowns<K>) {
    this.#shutdowns = shutdowns;
  }

  /** A ready spare for `slot` and `key` (a refill starts), or `undefined`. */
  take(slot: string, key: string): K | undefined {
    return this.#spares.get(spareSetId(slot, key))?.take();
  }

  /** Replaces the spare set for `slot` and `key` (draining the old one); `size: 0` removes it. */
  configure(slot: string, key: string, factory: KernelFactory<K>, opts: SparesOptions<K>): void {
    if (!Number.isInteger(opts.size) || opts.size < 0) {
      throw new InvalidOptionsError([{ path: 'spares.size', message: 'expected an integer >= 0' }], {
        subject: 'spare',
      });
    }
    const id = spareSetId(slot, key);
    const old = this.#spares.get(id);
    this.#spares.delete(id);
    if (old) this.#shutdowns.track(old.drain());
    if (opts.size === 0) return;
    const set = new SpareSet<K>({
      slot,
      key,
      factory: async (ctx) => this.#shutdowns.handOver(await factory(ctx)),
      size: opts.size,
      ...(opts.prepare ? { prepare: opts.prepare } : {}),
      shutdown: (k) => this.#shutdowns.shutdown(k),
      track: (p) => this.#shutdowns.track(p),
    });
    this.#spares.set(id, set);
    set.fill();
  }

  /** Drains the spare sets of `slot` (one key, or all keys; every slot when `slot` is undefined). */
  drain(slot: string | undefined, key?: string): Promise<void[]> {
    const drained: Promise<void>[] = [];
    for (const [id, set] of this.#spares) {
      if (slot === undefined || (set.slot === slot && (key === undefined || set.key === key))) {
        this.#spares.delete(id);
        drained.push(set.drain());
      }
    }
    return Promise.all(drained);
  }

  /** Resolves once the spare set is full; rejects with the refill's error, or at once when there is no such set. */
  async ready(slot: string, key: string, signal: AbortSignal | undefined): Promise<void> {
    const set = this.#spares.get(spareSetId(slot, key));
    if (!set) throw new InvalidOptionsError([{ path: 'key', message: `no spares for "${slot}" / "${key}"` }]);
    await set.ready(signal);
  }

  /** The spare set's counts, or an empty status when there is none. */
  status(slot: string, key: string): SparesStatus {
    return this.#spares.get(spareSetId(slot, key))?.status() ?? { ready: 0, filling: false, size: 0 };
  }
}

function spareSetId(slot: string, key: string): string {
  return JSON.stringify([slot, key]);
}
