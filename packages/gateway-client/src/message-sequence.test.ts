import { describe, expect, it } from 'vitest';
import { MessageSequence } from './message-sequence.js';

const id = (n: number, source = 'abc-session_4242') => `${source}_${n}`;

describe('MessageSequence', () => {
  it('counts the numbers that never arrived after a mark, forgiving reordering', () => {
    const seq = new MessageSequence();
    for (const n of [0, 1, 2]) seq.observe(id(n));
    const mark = seq.mark();
    // 4 arrives before 3 (two kernel threads), 6 never arrives.
    for (const n of [4, 3, 5, 7, 8]) seq.observe(id(n));
    expect(seq.missingSince(mark)).toBe(1);
    seq.observe(id(6));
    expect(seq.missingSince(mark)).toBe(0);
  });

  it('ignores holes before the mark', () => {
    const seq = new MessageSequence();
    for (const n of [0, 2]) seq.observe(id(n));
    const mark = seq.mark();
    for (const n of [3, 4]) seq.observe(id(n));
    expect(seq.missingSince(mark)).toBe(0);
  });

  it('starts over for a new kernel process and ids without a counter', () => {
    const seq = new MessageSequence();
    for (const n of [0, 1, 5]) seq.observe(id(n));
    const mark = seq.mark();
    seq.observe(id(0, 'other-session_99'));
    seq.observe(id(3, 'other-session_99'));
    expect(seq.missingSince(mark)).toBe(0);
    const plain = new MessageSequence();
    plain.observe('8d0f2a4e-6f1b-4f0e-9a53-0c4a0e1c2b3d');
    plain.observe('0f5e1c2b-3a4d-4b6e-8f70-112233445566');
    expect(plain.missingSince(plain.mark())).toBe(0);
  });

  it('keeps its memory bounded when replies to other clients leave holes for ever', () => {
    const seq = new MessageSequence();
    for (let n = 0; n < 200_000; n += 2) seq.observe(id(n));
    const mark = seq.mark();
    seq.observe(id(200_000));
    seq.observe(id(200_002));
    expect(seq.missingSince(mark)).toBe(2);
    expect(seq.missingSince({ source: 'abc-session_4242', max: -1 })).toBeLessThanOrEqual(2049 + 2);
  });
});
