import { describe, expect, it } from 'vitest';
import { POOL_MAX_STARTS, POOL_RETRY_MS, type PoolKeeperWorld, poolKeeper } from './pool-keeper.js';

/** A pool in memory: starts resolve when the test says so. */
function fakeWorld(wanted: Record<string, number>) {
  let now = 0;
  let next = 0;
  const ready = new Map<string, string[]>();
  const starts: { kernelName: string; settled: boolean; resolve(id: string): void; reject(error: Error): void }[] = [];
  const removed: string[] = [];
  const abandoned: string[] = [];
  const world: PoolKeeperWorld = {
    now: () => now,
    wanted: () => wanted,
    pooled: () => [...ready.keys()].filter((k) => (ready.get(k) ?? []).length > 0),
    ready: (k) => ready.get(k) ?? [],
    start: (kernelName) =>
      new Promise<string>((resolve, reject) => {
        const start = {
          kernelName,
          settled: false,
          resolve: (id: string) => {
            start.settled = true;
            resolve(id);
          },
          reject: (error: Error) => {
            start.settled = true;
            reject(error);
          },
        };
        starts.push(start);
      }),
    add: (k, id) => ready.set(k, [...(ready.get(k) ?? []), id]),
    surplus: (k, keep) => {
      const ids = ready.get(k) ?? [];
      ready.set(k, ids.slice(0, keep));
      return ids.slice(keep);
    },
    abandoned: () => abandoned.splice(0),
    remove: async (id) => {
      removed.push(id);
    },
    log: () => {},
  };
  return {
    world,
    ready,
    starts,
    removed,
    abandoned,
    advance: (ms: number) => {
      now += ms;
    },
    id: () => `k${next++}`,
  };
}

describe('poolKeeper', () => {
  it('starts every missing kernel of a kernelspec at once and puts each into the pool only once it answered', async () => {
    const f = fakeWorld({ python3: 2 });
    const keeper = poolKeeper(f.world);
    keeper.tick();
    keeper.tick();
    expect(f.starts.map((s) => s.kernelName)).toEqual(['python3', 'python3']);
    expect(f.world.ready('python3')).toEqual([]);
    f.starts[1]?.resolve(f.id());
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(f.world.ready('python3')).toEqual(['k0']);
    keeper.tick();
    expect(f.starts).toHaveLength(2);
    f.starts[0]?.resolve(f.id());
    await keeper.settled();
    keeper.tick();
    expect(f.world.ready('python3')).toEqual(['k0', 'k1']);
    expect(f.starts).toHaveLength(2);
  });

  it('starts the replacement of a claimed kernel at the next look while the other ready one waits', async () => {
    const f = fakeWorld({ python3: 2 });
    f.ready.set('python3', ['a', 'b']);
    const keeper = poolKeeper(f.world);
    keeper.tick();
    expect(f.starts).toHaveLength(0);
    f.ready.set('python3', ['b']); // a command claimed 'a'
    keeper.tick();
    expect(f.starts.map((s) => s.kernelName)).toEqual(['python3']);
    f.ready.set('python3', []); // and the next one 'b', before the first replacement answered
    keeper.tick();
    expect(f.starts).toHaveLength(2);
    for (const start of f.starts) start.resolve(f.id());
    await keeper.settled();
    expect(f.world.ready('python3')).toEqual(['k0', 'k1']);
  });

  it('starts at most POOL_MAX_STARTS kernels at once, all kernelspecs together, and the rest as those end', async () => {
    const f = fakeWorld({ python3: 3, ir: 2 });
    const keeper = poolKeeper(f.world);
    keeper.tick();
    expect(f.starts).toHaveLength(POOL_MAX_STARTS);
    keeper.tick();
    expect(f.starts).toHaveLength(POOL_MAX_STARTS);
    f.starts[0]?.resolve(f.id());
    await new Promise((resolve) => setTimeout(resolve, 0));
    keeper.tick();
    expect(f.starts).toHaveLength(POOL_MAX_STARTS + 1);
    for (let i = 0; i < 10 && f.starts.some((s) => !s.settled); i++) {
      for (const start of f.starts.filter((s) => !s.settled)) start.resolve(f.id());
      await new Promise((resolve) => setTimeout(resolve, 0));
      keeper.tick();
    }
    await keeper.settled();
    expect([f.world.ready('python3').length, f.world.ready('ir').length]).toEqual([3, 2]);
    expect(f.starts).toHaveLength(5);
  });

  it('deletes ready kernels beyond a smaller count and the kernels of abandoned claims', async () => {
    const wanted: Record<string, number> = { python3: 0 };
    const f = fakeWorld(wanted);
    f.ready.set('python3', ['a', 'b']);
    f.abandoned.push('c');
    const keeper = poolKeeper(f.world);
    keeper.tick();
    await keeper.settled();
    expect(f.removed.sort()).toEqual(['a', 'b', 'c']);
    expect(f.starts).toEqual([]);
  });

  it('waits POOL_RETRY_MS before starting a kernelspec again whose start failed', async () => {
    const f = fakeWorld({ nope: 1 });
    const keeper = poolKeeper(f.world);
    keeper.tick();
    f.starts[0]?.reject(new Error('no such kernelspec'));
    await keeper.settled();
    keeper.tick();
    expect(f.starts).toHaveLength(1);
    f.advance(POOL_RETRY_MS);
    keeper.tick();
    expect(f.starts).toHaveLength(2);
  });

  it('deletes a kernel that finished starting after the pool stopped wanting it', async () => {
    const wanted: Record<string, number> = { python3: 1 };
    const f = fakeWorld(wanted);
    const keeper = poolKeeper(f.world);
    keeper.tick();
    wanted.python3 = 0;
    f.starts[0]?.resolve('late');
    await keeper.settled();
    expect(f.removed).toEqual(['late']);
    expect(f.world.ready('python3')).toEqual([]);
  });
});
