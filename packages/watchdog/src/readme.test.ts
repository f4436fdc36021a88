import { readFile } from 'node:fs/promises';
import { defaultCell, readmeDefaultsFor } from '@kernelwarden/test-env';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_CELL_TIMEOUT_MS,
  DEFAULT_INTERRUPT_GRACE_MS,
  DEFAULT_KILL_GRACE_MS,
  DEFAULT_KILL_TIMEOUT_MS,
} from './policy.js';

describe('README', () => {
  it("states the policy's defaults as the code has them", async () => {
    const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8');
    const expected = {
      cellTimeoutMs: defaultCell(DEFAULT_CELL_TIMEOUT_MS, 'DEFAULT_CELL_TIMEOUT_MS'),
      interruptGraceMs: defaultCell(DEFAULT_INTERRUPT_GRACE_MS, 'DEFAULT_INTERRUPT_GRACE_MS'),
      killGraceMs: defaultCell(DEFAULT_KILL_GRACE_MS, 'DEFAULT_KILL_GRACE_MS'),
      killTimeoutMs: defaultCell(DEFAULT_KILL_TIMEOUT_MS, 'DEFAULT_KILL_TIMEOUT_MS'),
      clock: '`systemClock`',
    };
    expect(readmeDefaultsFor(readme, '- `WatchdogPolicy`:', expected)).toEqual(expected);
  });
});
