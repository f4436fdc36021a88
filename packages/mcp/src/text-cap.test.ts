import { describe, expect, it } from 'vitest';
import { HeadTailText } from './text-cap.js';

describe('HeadTailText', () => {
  it('returns the whole text when it fits the limit', () => {
    const text = new HeadTailText(100);
    text.push('hello\n');
    text.push('world\n');
    expect(text.cut).toBe(false);
    expect(text.render()).toBe('hello\nworld\n');
  });

  it('keeps the head and the tail of a long text and says how many characters and lines were cut', () => {
    const text = new HeadTailText(1_000);
    const lines = Array.from({ length: 10_000 }, (_, i) => `line ${i}\n`);
    for (const line of lines) text.push(line);
    const whole = lines.join('');
    const out = text.render();
    expect(out.startsWith(whole.slice(0, 500))).toBe(true);
    expect(out.endsWith(whole.slice(-500))).toBe(true);
    const notice = /\[… ([\d,]+) characters \(([\d,]+) lines\) cut from the middle of ([\d,]+)/.exec(out);
    expect(notice).not.toBeNull();
    expect(Number(notice![1]!.replaceAll(',', ''))).toBe(whole.length - 1_000);
    expect(Number(notice![3]!.replaceAll(',', ''))).toBe(whole.length);
    const cutLines = Number(notice![2]!.replaceAll(',', ''));
    // The kept head and tail hold ~130 of the 10,000 line ends.
    expect(cutLines).toBeGreaterThan(9_800);
    expect(cutLines).toBeLessThan(10_000);
    expect(out.length).toBeLessThan(1_000 + 200);
  });

  it('keeps the same head and tail whether the text comes in one chunk or many', () => {
    const whole = Array.from({ length: 5_000 }, (_, i) => `${i}\n`).join('');
    const one = new HeadTailText(300);
    one.push(whole);
    const many = new HeadTailText(300);
    for (let i = 0; i < whole.length; i += 7) many.push(whole.slice(i, i + 7));
    expect(many.render()).toBe(one.render());
  });

  it('tells whether the text pushed so far ends a line', () => {
    const text = new HeadTailText(10);
    expect(text.atLineStart).toBe(true);
    text.push('abc');
    expect(text.atLineStart).toBe(false);
    text.push('\n');
    expect(text.atLineStart).toBe(true);
  });
});
