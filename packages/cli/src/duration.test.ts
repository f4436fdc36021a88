import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from './duration.js';

describe('parseDuration', () => {
  it('reads ms, s, m and h, and a bare number as seconds', () => {
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('30s')).toBe(30_000);
    expect(parseDuration('2m')).toBe(120_000);
    expect(parseDuration('1.5h')).toBe(5_400_000);
    expect(parseDuration('2')).toBe(2000);
    expect(parseDuration('0.25s')).toBe(250);
    expect(parseDuration('0')).toBe(0);
  });

  it('refuses anything else', () => {
    for (const bad of ['5x', '', 's', '-1s', '1e3s', '30 sec', 'abc', '1.s'])
      expect(parseDuration(bad)).toBeUndefined();
  });
});

describe('formatDuration', () => {
  it('prints milliseconds, seconds and minutes for people', () => {
    expect(formatDuration(850)).toBe('850 ms');
    expect(formatDuration(2500)).toBe('2.5 s');
    expect(formatDuration(200_000)).toBe('3 min 20 s');
    expect(formatDuration(120_000)).toBe('2 min');
  });
});
