import { describe, expect, it } from 'vitest';
import { type EventMapOf, TypedEmitter } from './events.js';

type Shape = { type: 'circle'; r: number } | { type: 'square'; side: number };

describe('TypedEmitter', () => {
  it('calls the listeners of one event name, in the order they were added, with the payload', () => {
    const emitter = new TypedEmitter<{ status: { now: string }; other: number }>();
    const seen: string[] = [];
    emitter.on('status', (e) => seen.push(`a:${e.now}`));
    emitter.on('status', (e) => seen.push(`b:${e.now}`));
    emitter.on('other', (n) => seen.push(`other:${n}`));
    emitter.emit('status', { now: 'idle' });
    expect(seen).toEqual(['a:idle', 'b:idle']);
  });

  it('removes a listener through the returned function and through off(), idempotently', () => {
    const emitter = new TypedEmitter<{ tick: number }>();
    const seen: number[] = [];
    const listener = (n: number) => seen.push(n);
    const unsubscribe = emitter.on('tick', listener);
    emitter.emit('tick', 1);
    unsubscribe();
    unsubscribe();
    emitter.emit('tick', 2);
    emitter.on('tick', listener);
    emitter.off('tick', listener);
    emitter.off('tick', listener);
    emitter.emit('tick', 3);
    expect(seen).toEqual([1]);
  });

  it('isolates a throwing listener: the others still run and emit() does not throw', () => {
    const emitter = new TypedEmitter<{ tick: number }>();
    const seen: number[] = [];
    emitter.on('tick', () => {
      throw new Error('observer bug');
    });
    emitter.on('tick', (n) => seen.push(n));
    expect(() => emitter.emit('tick', 7)).not.toThrow();
    expect(seen).toEqual([7]);
  });

  it('lets a listener remove itself while the event is delivered, without skipping the next one', () => {
    const emitter = new TypedEmitter<{ tick: number }>();
    const seen: string[] = [];
    const off = emitter.on('tick', () => {
      seen.push('once');
      off();
    });
    emitter.on('tick', () => seen.push('always'));
    emitter.emit('tick', 1);
    emitter.emit('tick', 2);
    expect(seen).toEqual(['once', 'always', 'always']);
  });

  it('narrows events that carry their own type through EventMapOf', () => {
    const emitter = new TypedEmitter<EventMapOf<Shape>>();
    const radii: number[] = [];
    emitter.on('circle', (e) => radii.push(e.r));
    const events: Shape[] = [
      { type: 'circle', r: 2 },
      { type: 'square', side: 3 },
    ];
    for (const event of events) emitter.emit(event.type, event);
    expect(radii).toEqual([2]);
  });
});
