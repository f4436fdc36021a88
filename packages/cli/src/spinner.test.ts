import { afterEach, describe, expect, it, vi } from 'vitest';
import { Spinner } from './spinner.js';

function sink(isTTY: boolean) {
  const writes: string[] = [];
  return { isTTY, writes, write: (text: string) => writes.push(text) };
}

describe('Spinner', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('draws on a terminal after its delay and erases its line on stop', () => {
    vi.useFakeTimers();
    const stream = sink(true);
    const spinner = new Spinner(stream, { delayMs: 100 });
    spinner.start('starting python3 kernel');
    vi.advanceTimersByTime(99);
    expect(stream.writes).toEqual([]);
    vi.advanceTimersByTime(170);
    expect(stream.writes.length).toBeGreaterThanOrEqual(2);
    expect(stream.writes[0]).toMatch(/starting python3 kernel$/);
    spinner.stop();
    expect(stream.writes.at(-1)).toBe('\r\x1b[2K');
    const count = stream.writes.length;
    vi.advanceTimersByTime(1000);
    expect(stream.writes.length).toBe(count);
  });

  it('never writes to a pipe, when disabled (--json), or when stopped before its delay', () => {
    vi.useFakeTimers();
    const pipe = sink(false);
    new Spinner(pipe).start('x');
    const json = sink(true);
    new Spinner(json, { enabled: false }).start('x');
    const quick = sink(true);
    const spinner = new Spinner(quick, { delayMs: 100 });
    spinner.start('x');
    spinner.stop();
    vi.advanceTimersByTime(5000);
    expect([pipe.writes, json.writes, quick.writes]).toEqual([[], [], []]);
  });
});
