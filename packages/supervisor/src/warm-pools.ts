import { InvalidOptionsError } from '@kernelwarden/core';
import type { KernelShutdowns } from './kernel-shutdowns.js';
import type { SupervisedKernel } from './lease.js';
import { WarmPool, type WarmPoolOptions, type WarmPoolStatus } from './pool.js';
import type { KernelFactory } from './slot-supervisor.js';

/**
 * The supervisor's warm pools, one per slot and key. Their kernels are handed over and shut down through the
 * supervisor's `KernelShutdowns`, so a pooled kernel is shut down once too.
 *
 * Internal to the supervisor.
 */
export class WarmPools<K extends SupervisedKernel> {
  readonly #pools = new Map<string, WarmPool<K>>();
  readonly #shutdowns: KernelShutdowns<K>;

  constructor(shutdowns: KernelShutdowns<K>) {
    this.#shutdowns = shutdowns;
  }

  /** A ready kernel of the pool for `slot` and `key` (a refill starts), or `undefined`. */
  take(slot: string, key: string): K | undefined {
    return this.#pools.get(poolId(slot, key))?.take();
  }

  /** Replaces the pool for `slot` and `key` (draining the old one); `size: 0` removes it. */
  configure(slot: string, key: string, factory: KernelFactory<K>, opts: WarmPoolOptions<K>): void {
    if (!Number.isInteger(opts.size) || opts.size < 0) {
      throw new InvalidOptionsError([{ path: 'pool.size', message: 'expected an integer >= 0' }], { subject: 'pool' });
    }
    const id = poolId(slot, key);
    const old = this.#pools.get(id);
    this.#pools.delete(id);
    if (old) this.#shutdowns.track(old.drain());
    if (opts.size === 0) return;
    const pool = new WarmPool<K>({
      slot,
      key,
      factory: async (ctx) => this.#shutdowns.handOver(await factory(ctx)),
      size: opts.size,
      ...(opts.prepare ? { prepare: opts.prepare } : {}),
      shutdown: (k) => this.#shutdowns.shutdown(k),
      track: (p) => this.#shutdowns.track(p),
    });
    this.#pools.set(id, pool);
    pool.fill();
  }

  /** Drains the pools of `slot` (one key, or all keys; every slot when `slot` is undefined). */
  drain(slot: string | undefined, key?: string): Promise<void[]> {
    const drained: Promise<void>[] = [];
    for (const [id, pool] of this.#pools) {
      if (slot === undefined || (pool.slot === slot && (key === undefined || pool.key === key))) {
        this.#pools.delete(id);
        drained.push(pool.drain());
      }
    }
    return Promise.all(drained);
  }

  /** Resolves once the pool is full; rejects with the refill's error, or at once when there is no such pool. */
  async ready(slot: string, key: string, signal: AbortSignal | undefined): Promise<void> {
    const pool = this.#pools.get(poolId(slot, key));
    if (!pool) throw new InvalidOptionsError([{ path: 'key', message: `no warm pool for "${slot}" / "${key}"` }]);
    await pool.ready(signal);
  }

  /** The pool's counts, or an empty status when there is none. */
  status(slot: string, key: string): WarmPoolStatus {
    return this.#pools.get(poolId(slot, key))?.status() ?? { ready: 0, filling: false, size: 0 };
  }
}

function poolId(slot: string, key: string): string {
  return JSON.stringify([slot, key]);
}
