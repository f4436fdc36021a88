import { describe, expect, it } from 'vitest';
import { kernelJournalCapability, kernelJournalPageSchema, kernelJournalSearch } from './kernel-journal.js';

describe('kernelJournalCapability', () => {
  it("reads the journal a kernel's model offers, and nothing from a model without one or of another version", () => {
    const model = { id: 'k', name: 'python3' };
    expect(
      kernelJournalCapability({ ...model, kernelwarden_journal: { version: 1, max_bytes: 10, max_age_ms: 20 } }),
    ).toEqual({ version: 1, maxBytes: 10, maxAgeMs: 20 });
    expect(kernelJournalCapability(model)).toBeUndefined();
    expect(kernelJournalCapability(undefined)).toBeUndefined();
    expect(kernelJournalCapability({ ...model, kernelwarden_journal: { version: 2 } })).toBeUndefined();
    expect(kernelJournalCapability({ ...model, kernelwarden_journal: 'yes' })).toBeUndefined();
  });
});

describe('kernelJournalSearch', () => {
  it('writes numbers as generation.seq and leaves out what was not asked', () => {
    expect(kernelJournalSearch({})).toBe('');
    expect(kernelJournalSearch({ after: [2, 15], cell: 'a b', maxBytes: 1000.7 })).toBe(
      'cell=a+b&after=2.15&max_bytes=1000',
    );
    expect(kernelJournalSearch({ afterMsgId: 'm', waitForMsgId: 'w', waitMs: -3 })).toBe(
      'after_msg_id=m&wait_for_msg_id=w&wait_ms=0',
    );
  });
});

describe('the journal page schema', () => {
  const page = {
    kernel_id: 'k',
    last: [1, 2],
    lost: { from: [1, 1], to: [1, 1] },
    more: false,
    entries: [
      {
        n: [1, 2],
        msg: {
          header: { msg_id: 'm', msg_type: 'stream' },
          parent_header: { msg_id: 'p' },
          metadata: {},
          content: { name: 'stdout', text: 'x' },
          buffers: [],
          channel: 'iopub',
        },
      },
    ],
  };

  it('accepts what the server sends', () => {
    expect(kernelJournalPageSchema().safeParse(page).success).toBe(true);
  });

  it('refuses numbers that are not pairs of counts, and entries without a header', () => {
    expect(kernelJournalPageSchema().safeParse({ ...page, last: [1] }).success).toBe(false);
    expect(kernelJournalPageSchema().safeParse({ ...page, last: [1, -2] }).success).toBe(false);
    const noHeader = { ...page, entries: [{ n: [1, 2], msg: { ...page.entries[0]?.msg, header: null } }] };
    expect(kernelJournalPageSchema().safeParse(noHeader).success).toBe(false);
  });
});
