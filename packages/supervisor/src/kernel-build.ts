import { raceSignal } from '@kernelwarden/core';
import { BuildCancelledError, KernelFactoryError, messageOf } from './errors.js';
import { isAlive, type SupervisedKernel } from './lease.js';
import type { AcquireResult, EnsureOptions, KernelFactory } from './slot-supervisor.js';

/** What a build needs of its supervisor. */
export interface BuildHooks<K extends SupervisedKernel> {
  /** Records the factory's kernel as handed over (to be shut down once). */
  handOver(kernel: K): K;
  /** Shuts a kernel down, once per hand-over. */
  shutdown(kernel: K): Promise<void>;
  /** A build failed (emits `build_failed`). */
  failed(error: unknown): void;
  /** Publishes the built kernel as the slot's new generation and shuts the one it replaced down. */
  publish(kernel: K): Promise<AcquireResult<K>>;
}

/**
 * One kernel build for a slot and key: the factory, then the optional `prepare`, then publication — revocable at
 * every step. A revoked build rejects its waiters at once with `BuildCancelledError`, aborts the factory's and the
 * prepare's signal, and shuts down a kernel that still arrives instead of publishing it.
 *
 * Internal to the supervisor: `KernelSupervisor.acquire` starts them and callers wait on them.
 */
export class KernelBuild<K extends SupervisedKernel> {
  readonly slot: string;
  readonly key: string;
  readonly controller = new AbortController();
  /** Why the build was revoked, once it was. */
  revoked: string | undefined;
  /** Settles with the published lease; never rejects unhandled. */
  readonly promise: Promise<AcquireResult<K>>;
  #waiters = 0;
  readonly #builds: Set<KernelBuild<K>>;
  readonly #hooks: BuildHooks<K>;

  /** Starts the build at once and adds it to `builds` until it settles. */
  constructor(
    init: { slot: string; key: string; factory: KernelFactory<K>; prepare: EnsureOptions<K>['prepare'] },
    builds: Set<KernelBuild<K>>,
    hooks: BuildHooks<K>,
  ) {
    this.slot = init.slot;
    this.key = init.key;
    this.#builds = builds;
    this.#hooks = hooks;
    builds.add(this);
    this.promise = this.#run(init.factory, init.prepare);
    this.promise.catch(() => {});
  }

  /** Cancels the build (idempotent): its signal aborts with `BuildCancelledError`. */
  revoke(why: string): void {
    if (this.revoked !== undefined) return;
    this.revoked = why;
    this.controller.abort(new BuildCancelledError(this.slot, why));
  }

  /**
   * Waits for the build. A caller whose `signal` aborts stops waiting; when it was the only one waiting, the build
   * is revoked.
   */
  async wait(signal: AbortSignal | undefined): Promise<AcquireResult<K>> {
    this.#waiters += 1;
    try {
      // A revoked build rejects its waiters at once (with BuildCancelledError); its kernel is shut down on arrival.
      return await raceSignal(raceSignal(this.promise, this.controller.signal), signal);
    } catch (error) {
      if (signal?.aborted && this.#waiters === 1) this.revoke('the caller gave up waiting');
      throw error;
    } finally {
      this.#waiters -= 1;
    }
  }

  async #run(factory: KernelFactory<K>, prepare: EnsureOptions<K>['prepare']): Promise<AcquireResult<K>> {
    const { slot, key, controller } = this;
    const fail = (failure: unknown): unknown => {
      this.#hooks.failed(failure);
      return failure;
    };
    let kernel: K;
    try {
      kernel = this.#hooks.handOver(await factory({ slot, key, purpose: 'main', signal: controller.signal }));
    } catch (error) {
      this.#builds.delete(this);
      if (this.revoked !== undefined) throw new BuildCancelledError(slot, this.revoked);
      throw fail(new KernelFactoryError(slot, key, messageOf(error), error));
    }
    try {
      if (this.revoked !== undefined) throw new BuildCancelledError(slot, this.revoked);
      if (!isAlive(kernel)) throw fail(new KernelFactoryError(slot, key, 'the factory returned a dead kernel'));
      if (prepare) {
        await this.#prepare(kernel, prepare).catch((error: unknown) => {
          throw this.revoked !== undefined ? new BuildCancelledError(slot, this.revoked) : fail(error);
        });
        if (!isAlive(kernel)) throw fail(new KernelFactoryError(slot, key, 'the kernel died while prepared'));
        // Revoked after the prepare settled but before this continuation ran (a stop in between).
        if (this.revoked !== undefined) throw new BuildCancelledError(slot, this.revoked);
      }
    } catch (error) {
      this.#builds.delete(this);
      await this.#hooks.shutdown(kernel);
      throw error;
    }
    this.#builds.delete(this);
    return this.#hooks.publish(kernel);
  }

  /**
   * Runs the `prepare` until it settles or the build is revoked; on revocation the kernel is shut down at once
   * (which also ends a prepare that waits on the kernel) instead of waiting for a prepare that ignores its signal.
   */
  async #prepare(kernel: K, prepare: NonNullable<EnsureOptions<K>['prepare']>): Promise<void> {
    const signal = this.controller.signal;
    const preparing = (async () => prepare(kernel, { slot: this.slot, key: this.key, signal }))();
    preparing.catch(() => {});
    await raceSignal(preparing, signal);
  }
}
