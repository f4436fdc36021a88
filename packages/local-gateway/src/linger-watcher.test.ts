import { describe, expect, it } from 'vitest';
import { type LingerWatcher, lingerWatcher, type WatcherWorld } from './linger-watcher.js';
import type { HeldLock } from './lock.js';

/** A world of fakes the test sets directly: a clock, a server, holders, a lock and a linger promise. */
class FakeWorld implements WatcherWorld {
  time = 1_000_000;
  alive = true;
  recorded = true;
  holders = 0;
  promise: number | undefined;
  lockHeldElsewhere = false;
  lockHeld = false;
  stops: string[] = [];
  logs: string[] = [];
  /** Runs during `stopServer`, to check what holds while it runs. */
  duringStop: (() => void) | undefined;
  failure: Error | undefined;

  now = () => this.time;
  serverAlive = () => {
    if (this.failure) throw this.failure;
    return this.alive;
  };
  recordNamesServer = () => this.recorded;
  liveHolders = () => this.holders;
  lingerUntil = () => this.promise;
  tryLock = (): HeldLock | undefined => {
    if (this.lockHeldElsewhere || this.lockHeld) return undefined;
    this.lockHeld = true;
    const release = () => {
      this.lockHeld = false;
    };
    return { path: 'lock', release, [Symbol.dispose]: release };
  };
  stopServer = async (reason: string) => {
    this.duringStop?.();
    this.stops.push(reason);
    this.alive = false;
  };
  log = (message: string) => {
    this.logs.push(message);
  };
}

function setup(defaultLingerMs: number): { world: FakeWorld; watcher: LingerWatcher } {
  const world = new FakeWorld();
  return { world, watcher: lingerWatcher({ defaultLingerMs }, world) };
}

describe('linger watcher decisions', () => {
  it('keeps watching while a holder lives, however long', async () => {
    const { world, watcher } = setup(0);
    world.holders = 1;
    for (let i = 0; i < 5; i++) {
      world.time += 3_600_000;
      expect(await watcher.tick()).toBe('watching');
    }
    expect(world.stops).toEqual([]);
  });

  it('counts the default linger from when it first saw no holder, and restarts the count when one comes back', async () => {
    const { world, watcher } = setup(30_000);
    world.holders = 0;
    expect(await watcher.tick()).toBe('watching'); // idle from now
    world.time += 20_000;
    world.holders = 1;
    expect(await watcher.tick()).toBe('watching');
    world.holders = 0;
    world.time += 1;
    expect(await watcher.tick()).toBe('watching'); // idle again, from now
    world.time += 29_999;
    expect(await watcher.tick()).toBe('watching');
    expect(world.stops).toEqual([]);
    world.time += 1;
    expect(await watcher.tick()).toBe('exit');
    expect(world.stops).toHaveLength(1);
    expect(world.lockHeld).toBe(false);
  });

  it("keeps the server up until a release's linger promise, even past the default linger", async () => {
    const { world, watcher } = setup(0);
    world.promise = world.time + 60_000;
    expect(await watcher.tick()).toBe('watching');
    world.time += 59_999;
    expect(await watcher.tick()).toBe('watching');
    world.time += 1;
    expect(await watcher.tick()).toBe('exit');
    expect(world.stops[0]).toMatch(/^no holder, and the linger ran out at /);
  });

  it('stops the server only while holding the lock, and waits while someone else holds it', async () => {
    const { world, watcher } = setup(0);
    world.lockHeldElsewhere = true;
    expect(await watcher.tick()).toBe('watching');
    expect(world.stops).toEqual([]);
    world.lockHeldElsewhere = false;
    let heldDuringStop = false;
    world.duringStop = () => {
      heldDuringStop = world.lockHeld;
    };
    expect(await watcher.tick()).toBe('exit');
    expect(heldDuringStop).toBe(true);
    expect(world.lockHeld).toBe(false);
  });

  it('checks again under the lock: a holder that arrived, or another server, keeps it from stopping', async () => {
    const { world, watcher } = setup(0);
    world.tryLock = () => {
      world.holders = 1; // acquired between the look and the lock
      return new FakeWorld().tryLock();
    };
    expect(await watcher.tick()).toBe('watching');
    expect(world.stops).toEqual([]);
  });

  it('exits without stopping anything when the info file names another server', async () => {
    const { world, watcher } = setup(0);
    world.recorded = false;
    expect(await watcher.tick()).toBe('exit');
    expect(world.stops).toEqual([]);
    expect(world.logs).toContain('the info file names another server; exiting');
  });

  it('clears the state of a server that exited on its own when it can take the lock, and exits either way', async () => {
    const first = setup(60_000);
    first.world.holders = 1;
    first.world.alive = false;
    expect(await first.watcher.tick()).toBe('exit');
    expect(first.world.stops).toEqual(['the server exited on its own']);
    expect(first.world.lockHeld).toBe(false);

    const locked = setup(60_000);
    locked.world.alive = false;
    locked.world.lockHeldElsewhere = true;
    expect(await locked.watcher.tick()).toBe('exit');
    expect(locked.world.stops).toEqual([]);

    const replaced = setup(60_000);
    replaced.world.alive = false;
    replaced.world.recorded = false;
    expect(await replaced.watcher.tick()).toBe('exit');
    expect(replaced.world.stops).toEqual([]);
  });

  it('exits once the server is gone even when its state cannot be cleared (the directory was removed)', async () => {
    const { world, watcher } = setup(0);
    world.alive = false;
    world.tryLock = () => {
      throw new Error('ENOENT: no such file or directory');
    };
    expect(await watcher.tick()).toBe('exit');
    expect(world.logs).toEqual(['error: ENOENT: no such file or directory', 'the server is gone; exiting']);
  });

  it('never runs two looks at once', async () => {
    const { world, watcher } = setup(0);
    let finish: () => void = () => {};
    world.stopServer = (reason) =>
      new Promise<void>((resolve) => {
        world.stops.push(reason);
        finish = resolve;
      });
    const first = watcher.tick();
    expect(await watcher.tick()).toBe('watching'); // the first is still stopping the server
    finish();
    expect(await first).toBe('exit');
    expect(world.stops).toHaveLength(1);
  });

  it('logs an error once per distinct message and keeps watching', async () => {
    const { world, watcher } = setup(0);
    world.failure = new Error('EACCES: permission denied');
    expect(await watcher.tick()).toBe('watching');
    expect(await watcher.tick()).toBe('watching');
    world.failure = new Error('EIO');
    expect(await watcher.tick()).toBe('watching');
    expect(world.logs).toEqual(['error: EACCES: permission denied', 'error: EIO']);
    world.failure = undefined;
    expect(await watcher.tick()).toBe('exit');
  });
});
