/**
 * What the pool keeper reads and does, so that its decisions can be driven by tests with fakes. In the linger
 * watcher it is backed by the gateway's pool files and the server's REST API.
 */
export interface PoolKeeperWorld {
  now(): number;
  /** The counts the pool should keep, per kernelspec (the last acquire's). */
  wanted(): Record<string, number>;
  /** Kernelspecs that have ready kernels in the pool (some may no longer be wanted). */
  pooled(): string[];
  /** The ready kernels of one kernelspec. */
  ready(kernelName: string): string[];
  /** Starts a kernel of `kernelName` and resolves with its id once it answered (it is deleted if it did not). */
  start(kernelName: string): Promise<string>;
  /** Puts a started kernel into the pool. */
  add(kernelName: string, kernelId: string): void;
  /** Takes the ready kernels beyond the first `keep` out of the pool; their ids. */
  surplus(kernelName: string, keep: number): string[];
  /** The kernels of claims whose claimant died before recording itself as owner (their claim files are dropped). */
  abandoned(): string[];
  /** Deletes a kernel (a pooled one no longer wanted, or an abandoned claim's). */
  remove(kernelId: string): Promise<void>;
  log(message: string): void;
}

/** After a kernelspec's kernel failed to start, how long before the keeper tries that kernelspec again: 30 s. */
export const POOL_RETRY_MS = 30_000;

/**
 * The most kernels the keeper starts at once, all kernelspecs together: 2. Enough to refill the default pool of
 * one while the next command claims, and to start two missing kernels together; no more, so that a large pool's
 * refill never fills the server's start queue ahead of a command's own create.
 */
export const POOL_MAX_STARTS = 2;

/** Keeps the warm pool at its wanted counts; `tick()` once per look of the linger watcher. */
export interface PoolKeeper {
  /** One look: removes what is not wanted, starts the kernels that are missing (in the background). */
  tick(): void;
  /** Resolves once every start and removal in progress has ended. */
  settled(): Promise<void>;
}

/**
 * The pool keeper's logic. Each look: kernels of abandoned claims and ready kernels beyond their kernelspec's
 * count are deleted; for each kernelspec with fewer ready and starting kernels than wanted, the missing ones are
 * started at once, at most `POOL_MAX_STARTS` in all (commands that follow each other closely claim faster than one
 * start at a time would refill), unless a start of it failed within `POOL_RETRY_MS`. A kernel is put into the pool
 * only once it answered. Errors are logged, never thrown.
 */
export function poolKeeper(world: PoolKeeperWorld): PoolKeeper {
  const starting = new Map<string, number>();
  const failedAt = new Map<string, number>();
  const work = new Set<Promise<void>>();

  const track = (promise: Promise<void>) => {
    const tracked = promise.finally(() => work.delete(tracked));
    work.add(tracked);
  };
  const remove = (kernelId: string, why: string) =>
    track(
      world.remove(kernelId).then(
        () => world.log(`deleted pooled kernel ${kernelId} (${why})`),
        (error: unknown) =>
          world.log(`error: could not delete pooled kernel ${kernelId}: ${(error as Error)?.message}`),
      ),
    );

  const fill = (kernelName: string) => {
    starting.set(kernelName, (starting.get(kernelName) ?? 0) + 1);
    track(
      world
        .start(kernelName)
        .then(
          (kernelId) => {
            failedAt.delete(kernelName);
            if ((world.wanted()[kernelName] ?? 0) > world.ready(kernelName).length) world.add(kernelName, kernelId);
            else remove(kernelId, 'no longer wanted');
          },
          (error: unknown) => {
            failedAt.set(kernelName, world.now());
            world.log(`error: could not start a pooled ${kernelName} kernel: ${(error as Error)?.message}`);
          },
        )
        .finally(() => starting.set(kernelName, (starting.get(kernelName) ?? 1) - 1)),
    );
  };

  return {
    tick() {
      try {
        for (const kernelId of world.abandoned()) remove(kernelId, 'its claimant died');
        const wanted = world.wanted();
        for (const kernelName of new Set([...Object.keys(wanted), ...world.pooled()])) {
          const want = wanted[kernelName] ?? 0;
          const ready = world.ready(kernelName).length;
          if (ready > want) {
            for (const kernelId of world.surplus(kernelName, want)) remove(kernelId, 'the pool was made smaller');
            continue;
          }
          const missing = want - ready - (starting.get(kernelName) ?? 0);
          if (missing <= 0) continue;
          const failed = failedAt.get(kernelName);
          if (failed !== undefined && world.now() - failed < POOL_RETRY_MS) continue;
          const room = POOL_MAX_STARTS - [...starting.values()].reduce((sum, n) => sum + n, 0);
          for (let i = 0; i < Math.min(missing, room); i++) fill(kernelName);
        }
      } catch (error) {
        world.log(`error: ${(error as Error)?.message}`);
      }
    },
    async settled() {
      while (work.size > 0) await Promise.allSettled([...work]);
    },
  };
}
