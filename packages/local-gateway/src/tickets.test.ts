import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { callRecorder } from './dir-watch.test-fixture.js';
import { ensurePrivateDir, removeFile } from './state-dir.js';
import { addTicket, TICKET_SETTLE_MS, watchTicketReleases } from './tickets.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function ticketsDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'kw-tickets-'));
  dirs.push(dir);
  const tickets = join(dir, 'tickets');
  ensurePrivateDir(tickets);
  return tickets;
}

describe('watchTicketReleases', () => {
  it('calls back once a ticket is given back, not when one is taken, a burst of releases making one call', async () => {
    const tickets = ticketsDir();
    const { callback, calls, next } = callRecorder();
    const watching = watchTicketReleases(tickets, callback);
    try {
      const first = addTicket(tickets, 0); // a temporary file renamed into place
      const second = addTicket(tickets, 0);
      await new Promise((r) => setTimeout(r, 2 * TICKET_SETTLE_MS));
      expect(calls()).toBe(0);

      const change = next();
      removeFile(first);
      removeFile(second);
      await change;
      await new Promise((r) => setTimeout(r, 2 * TICKET_SETTLE_MS));
      expect(calls()).toBe(1);
    } finally {
      watching.close();
    }
  });

  it('leaves a missing directory to the looks', () => {
    const parent = mkdtempSync(join(tmpdir(), 'kw-tickets-'));
    dirs.push(parent);
    expect(() => watchTicketReleases(join(parent, 'absent'), () => {}).close()).not.toThrow();
  });
});
