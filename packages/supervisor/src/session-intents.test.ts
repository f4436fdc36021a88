import { describe, expect, it } from 'vitest';
import { ClosedError, SessionStoppedError } from './errors.js';
import { SessionIntents, type Turn } from './session-intents.js';

function deferred(): { promise: Promise<void>; resolve: () => void; reject: (error: Error) => void } {
  let resolve!: () => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

function asTurn(value: Turn | 'cancelled'): Turn {
  if (value === 'cancelled') throw new Error('expected a turn');
  return value;
}

/** A stop whose work holds the session's own turn until `finish` resolves it. */
function startStop(intents: SessionIntents, log: string[] = []) {
  const finish = deferred();
  const done = intents.stop(new Error('stopped'), async () => {
    log.push('begin');
    const release = await intents.ownTurn();
    try {
      await finish.promise;
    } finally {
      release();
    }
  });
  return { done, finish };
}

function startClose(intents: SessionIntents) {
  const finish = deferred();
  const done = intents.close(new Error('closed'), async () => {
    const release = await intents.ownTurn();
    try {
      await finish.promise;
      intents.closeFinished();
    } finally {
      release();
    }
  });
  return { done, finish };
}

describe('SessionIntents', () => {
  it('starts ready: not cancelled, not stopping, no turn, not closed', () => {
    const intents = new SessionIntents();
    expect(intents.state).toBe('ready');
    expect(intents.ending).toBe(false);
    expect(intents.flags()).toEqual({ cancelled: false, stopping: false, turnRunning: false, closed: false });
  });

  it('ready → stopping on stop(): the running turn is aborted, its stop signal first, after begin ran', async () => {
    const intents = new SessionIntents();
    const turn = asTurn(await intents.admit('execute', undefined));
    expect(intents.flags().turnRunning).toBe(true);
    const order: string[] = [];
    turn.stopSignal.addEventListener('abort', () => order.push('stopSignal'));
    turn.signal.addEventListener('abort', () => order.push('signal'));
    const reason = new Error('stopped');
    const finish = deferred();
    const done = intents.stop(reason, async () => {
      order.push('begin');
      const release = await intents.ownTurn();
      await finish.promise;
      release();
    });
    expect(order).toEqual(['begin', 'stopSignal', 'signal']);
    expect(turn.signal.reason).toBe(reason);
    expect(intents.state).toBe('stopping');
    expect(intents.flags()).toMatchObject({ cancelled: true, stopping: true });
    turn.end();
    finish.resolve();
    await done;
  });

  it('stopping → cancelled when the stop settles, also when its work fails', async () => {
    const intents = new SessionIntents();
    const ok = startStop(intents);
    ok.finish.resolve();
    await ok.done;
    expect(intents.state).toBe('cancelled');
    expect(intents.flags()).toEqual({ cancelled: true, stopping: false, turnRunning: false, closed: false });

    const failing = startStop(intents);
    expect(intents.state).toBe('stopping');
    failing.finish.reject(new Error('shutdown failed'));
    await expect(failing.done).rejects.toThrow('shutdown failed');
    expect(intents.state).toBe('cancelled');
  });

  it('cancelled → stopping on another stop()', async () => {
    const intents = new SessionIntents();
    const first = startStop(intents);
    first.finish.resolve();
    await first.done;
    const second = startStop(intents);
    expect(intents.state).toBe('stopping');
    second.finish.resolve();
    await second.done;
    expect(intents.state).toBe('cancelled');
  });

  it('stopping → stopping on stop(): joins the stop in progress without running begin again', async () => {
    const intents = new SessionIntents();
    const log: string[] = [];
    const first = startStop(intents, log);
    const joined = intents.stop(new Error('again'), async () => {
      log.push('second begin');
    });
    expect(joined).toBe(first.done);
    expect(log).toEqual(['begin']);
    first.finish.resolve();
    await joined;
  });

  it('a stop that joins one in progress still cancels the work issued between the two', async () => {
    const intents = new SessionIntents();
    const first = startStop(intents);
    const between = intents.admit('execute', undefined);
    void intents.stop(new Error('again'), async () => undefined);
    first.finish.resolve();
    await first.done;
    await expect(between).resolves.toBe('cancelled');
  });

  it('work issued during a stop waits for it and then runs', async () => {
    const intents = new SessionIntents();
    const stop = startStop(intents);
    let admitted: Turn | 'cancelled' | undefined;
    void intents.admit('execute', undefined).then((value) => {
      admitted = value;
    });
    await flush();
    expect(admitted).toBeUndefined();
    stop.finish.resolve();
    await stop.done;
    await flush();
    const turn = asTurn(admitted ?? 'cancelled');
    expect(intents.state).toBe('ready');
    turn.end();
  });

  it('work issued before a stop is cancelled when its turn comes (the last intent wins)', async () => {
    const intents = new SessionIntents();
    const running = asTurn(await intents.admit('execute', undefined));
    const queued = intents.admit('start', undefined);
    const stop = startStop(intents);
    expect(running.signal.aborted).toBe(true);
    running.end();
    await expect(queued).resolves.toBe('cancelled');
    stop.finish.resolve();
    await stop.done;
    expect(intents.state).toBe('cancelled');
  });

  it.each(['execute', 'start', 'restart'] as const)('cancelled → ready when %s enters its turn', async (intent) => {
    const intents = new SessionIntents();
    const stop = startStop(intents);
    stop.finish.resolve();
    await stop.done;
    const turn = asTurn(await intents.admit(intent, undefined));
    expect(intents.state).toBe('ready');
    expect(intents.cancelled).toBe(false);
    turn.end();
  });

  it('cancelled stays cancelled when setEnv enters its turn', async () => {
    const intents = new SessionIntents();
    const stop = startStop(intents);
    stop.finish.resolve();
    await stop.done;
    const turn = asTurn(await intents.admit('setEnv', undefined));
    expect(intents.state).toBe('cancelled');
    turn.end();
  });

  it('a turn follows its caller’s signal, and a caller that aborts while waiting gives up its place', async () => {
    const intents = new SessionIntents();
    const holder = asTurn(await intents.admit('execute', undefined));
    const caller = new AbortController();
    const waiting = intents.admit('execute', caller.signal);
    caller.abort(new Error('caller gave up'));
    await expect(waiting).rejects.toThrow('caller gave up');
    holder.end();
    expect(intents.flags().turnRunning).toBe(false);

    const second = new AbortController();
    const turn = asTurn(await intents.admit('execute', second.signal));
    second.abort(new Error('later'));
    expect(turn.signal.aborted).toBe(true);
    expect(turn.stopSignal.aborted).toBe(false);
    turn.end();
  });

  it('Turn.end() a second time is a no-op: it does not release a later turn’s barrier', async () => {
    const intents = new SessionIntents();
    const first = asTurn(await intents.admit('execute', undefined));
    first.end();
    const second = asTurn(await intents.admit('execute', undefined));
    first.end();
    expect(intents.flags().turnRunning).toBe(true);
    let third: Turn | 'cancelled' | undefined;
    void intents.admit('execute', undefined).then((value) => {
      third = value;
    });
    await flush();
    expect(third).toBeUndefined();
    second.end();
    await flush();
    asTurn(third ?? 'cancelled').end();
  });

  it('a turn begins as it is granted: a stop issued before its holder resumes still aborts it', async () => {
    const intents = new SessionIntents();
    const admission = intents.admit('execute', undefined);
    await flush();
    const stop = startStop(intents);
    const turn = asTurn(await admission);
    expect(turn.signal.aborted).toBe(true);
    expect(intents.state).toBe('stopping');
    turn.end();
    stop.finish.resolve();
    await stop.done;
    expect(intents.state).toBe('cancelled');
  });

  it('a turn that ended is not aborted by a later stop', async () => {
    const intents = new SessionIntents();
    const turn = asTurn(await intents.admit('execute', undefined));
    turn.end();
    const stop = startStop(intents);
    expect(turn.signal.aborted).toBe(false);
    stop.finish.resolve();
    await stop.done;
  });

  it.each(['ready', 'cancelled'] as const)('%s → closing on close(), then closed on closeFinished()', async (from) => {
    const intents = new SessionIntents();
    if (from === 'cancelled') {
      const stop = startStop(intents);
      stop.finish.resolve();
      await stop.done;
    }
    expect(intents.state).toBe(from);
    const turn = asTurn(await intents.admit('setEnv', undefined));
    const close = startClose(intents);
    expect(intents.state).toBe('closing');
    expect(intents.ending).toBe(true);
    expect(turn.stopSignal.aborted).toBe(true);
    expect(intents.turnError(turn.signal.reason, turn, undefined, 'setEnv()')).toBeInstanceOf(ClosedError);
    turn.end();
    close.finish.resolve();
    await close.done;
    expect(intents.state).toBe('closed');
    expect(intents.flags()).toEqual({ cancelled: true, stopping: false, turnRunning: false, closed: true });
  });

  it('stopping → closing on close(): the close waits for the stop, which then leaves the state closing', async () => {
    const intents = new SessionIntents();
    const stop = startStop(intents);
    const close = startClose(intents);
    expect(intents.state).toBe('closing');
    expect(intents.flags().stopping).toBe(true);
    close.finish.resolve();
    await flush();
    expect(intents.state).toBe('closing');
    stop.finish.resolve();
    await stop.done;
    expect(intents.state).toBe('closing');
    await close.done;
    expect(intents.state).toBe('closed');
  });

  it('close() while closing or closed returns the same promise and runs nothing more', async () => {
    const intents = new SessionIntents();
    const close = startClose(intents);
    let again = 0;
    const second = intents.close(new Error('again'), async () => {
      again += 1;
    });
    expect(second).toBe(close.done);
    close.finish.resolve();
    await close.done;
    expect(
      intents.close(new Error('after'), async () => {
        again += 1;
      }),
    ).toBe(close.done);
    expect(again).toBe(0);
  });

  it('stop() while closing or closed changes nothing and returns the close’s promise', async () => {
    const intents = new SessionIntents();
    const close = startClose(intents);
    let began = false;
    const during = intents.stop(new Error('stop'), async () => {
      began = true;
    });
    expect(during).toBe(close.done);
    expect(intents.state).toBe('closing');
    close.finish.resolve();
    await close.done;
    expect(
      intents.stop(new Error('stop'), async () => {
        began = true;
      }),
    ).toBe(close.done);
    expect(intents.state).toBe('closed');
    expect(began).toBe(false);
  });

  it('admit is refused with ClosedError while closing and closed, also for work that waited for a stop', async () => {
    const intents = new SessionIntents();
    const stop = startStop(intents);
    const waited = intents.admit('execute', undefined);
    const close = startClose(intents);
    await expect(intents.admit('start', undefined)).rejects.toBeInstanceOf(ClosedError);
    stop.finish.resolve();
    await expect(waited).rejects.toBeInstanceOf(ClosedError);
    close.finish.resolve();
    await close.done;
    await expect(intents.admit('execute', undefined)).rejects.toBeInstanceOf(ClosedError);
  });

  it('work queued at the barrier when a close begins is refused with ClosedError', async () => {
    const intents = new SessionIntents();
    const running = asTurn(await intents.admit('execute', undefined));
    const queued = intents.admit('execute', undefined);
    const close = startClose(intents);
    running.end();
    await expect(queued).rejects.toBeInstanceOf(ClosedError);
    close.finish.resolve();
    await close.done;
  });

  it('closeFinished() outside closing is a no-op', async () => {
    const intents = new SessionIntents();
    intents.closeFinished();
    expect(intents.state).toBe('ready');
    const stop = startStop(intents);
    intents.closeFinished();
    expect(intents.state).toBe('stopping');
    stop.finish.resolve();
    await stop.done;
    intents.closeFinished();
    expect(intents.state).toBe('cancelled');
  });

  it('a close that fails stays closing and keeps refusing work', async () => {
    const intents = new SessionIntents();
    const close = startClose(intents);
    close.finish.reject(new Error('shutdown failed'));
    await expect(close.done).rejects.toThrow('shutdown failed');
    expect(intents.state).toBe('closing');
    expect(intents.flags().closed).toBe(false);
    await expect(intents.admit('execute', undefined)).rejects.toBeInstanceOf(ClosedError);
  });

  it('turnError: the step’s own error, the caller’s abort reason, or SessionStoppedError for a stop', async () => {
    const intents = new SessionIntents();
    const own = asTurn(await intents.admit('start', undefined));
    const failure = new Error('build failed');
    expect(intents.turnError(failure, own, undefined, 'start()')).toBe(failure);
    own.end();

    const caller = new AbortController();
    const aborted = asTurn(await intents.admit('restart', caller.signal));
    caller.abort(new Error('caller'));
    expect(intents.turnError(aborted.signal.reason, aborted, caller.signal, 'restart()')).toBe(caller.signal.reason);
    aborted.end();

    const stopped = asTurn(await intents.admit('setEnv', undefined));
    const stop = startStop(intents);
    const error = intents.turnError(stopped.signal.reason, stopped, undefined, 'setEnv()');
    expect(error).toBeInstanceOf(SessionStoppedError);
    stopped.end();
    stop.finish.resolve();
    await stop.done;
  });
});
