import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { GatewayKernel } from '@kernelwarden/gateway-client';
import { testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalGateway, type LocalGatewayTicket } from './index.js';

function freshDir(name: string): string {
  const dir = join(testGateway().root, `journal-${name}-${randomBytes(4).toString('hex')}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

type Number = [number, number];
interface JournalEntry {
  n: Number;
  msg: {
    header: { msg_id: string; msg_type: string };
    parent_header: { msg_id?: string };
    content: Record<string, unknown>;
  };
}
interface JournalAnswer {
  kernel_id: string;
  last: Number;
  lost: { from: Number; to: Number } | null;
  more: boolean;
  complete?: boolean;
  entries: JournalEntry[];
}

async function journal(ticket: LocalGatewayTicket, kernelId: string, query: string): Promise<JournalAnswer> {
  const res = await fetch(`${ticket.baseUrl}/api/kernels/${kernelId}/journal?${query}`, {
    headers: { Authorization: `token ${ticket.token}` },
  });
  if (res.status !== 200) throw new Error(`journal ${query}: HTTP ${res.status} ${await res.text()}`);
  return (await res.json()) as JournalAnswer;
}

/** Every journal entry after `after`, read page by page. */
async function readAll(ticket: LocalGatewayTicket, kernelId: string, after: string, maxBytes: number) {
  const entries: JournalEntry[] = [];
  let cursor = after;
  let pages = 0;
  for (;;) {
    const page = await journal(ticket, kernelId, `after=${cursor}&max_bytes=${maxBytes}`);
    pages++;
    entries.push(...page.entries);
    if (!page.more) return { entries, pages, last: page };
    const n = page.entries.at(-1)?.n as Number;
    cursor = `${n[0]}.${n[1]}`;
  }
}

/** The request id of the cell whose code is `code`, from its execute_input in the journal. */
function requestOf(entries: JournalEntry[], code: string): string {
  const input = entries.find((e) => e.msg.header.msg_type === 'execute_input' && e.msg.content.code === code);
  if (!input?.msg.parent_header.msg_id) throw new Error(`no execute_input for ${code}`);
  return input.msg.parent_header.msg_id;
}

function stdoutOf(entries: JournalEntry[]): string {
  return entries
    .filter((e) => e.msg.header.msg_type === 'stream' && e.msg.content.name === 'stdout')
    .map((e) => e.msg.content.text)
    .join('');
}

const LINES = 'for i in range(1000):\n    print(i, flush=True)';
const EXPECTED = Array.from({ length: 1000 }, (_, i) => `${i}\n`).join('');

describe('the kernel journal of the embedded server', () => {
  let ticket: LocalGatewayTicket;
  let small: LocalGatewayTicket;

  beforeAll(async () => {
    ticket = await LocalGateway.acquire({ stateDir: freshDir('default'), lingerMs: 0, pool: {} });
    small = await LocalGateway.acquire({
      stateDir: freshDir('small'),
      lingerMs: 0,
      pool: {},
      journal: { maxBytes: 16 * 1024 },
    });
  });
  afterAll(async () => {
    await ticket?.release();
    await small?.release();
  });

  it("says so in the kernel's model, and records a cell's every message from the kernel's start, in order", async () => {
    await using kernel = await GatewayKernel.start({ gateway: ticket });
    const model = (await (
      await fetch(`${ticket.baseUrl}/api/kernels/${kernel.id}`, { headers: { Authorization: `token ${ticket.token}` } })
    ).json()) as Record<string, unknown>;
    expect(model.kernelwarden_journal).toEqual({ version: 1, max_bytes: 32 * 1024 * 1024, max_age_ms: 600_000 });
    const result = await kernel.execute(LINES);
    expect(result.status).toBe('ok');
    const all = await readAll(ticket, kernel.id, '0.0', 4 * 1024 * 1024);
    expect(all.last.lost).toBeNull();
    const request = requestOf(all.entries, LINES);
    const cell = await journal(ticket, kernel.id, `cell=${request}`);
    expect(cell.complete).toBe(true);
    expect(cell.lost).toBeNull();
    expect(stdoutOf(cell.entries)).toBe(EXPECTED);
    const numbers = all.entries.map((e) => e.n);
    expect(numbers).toEqual(numbers.map((_, i) => [1, i + 1]));
  });

  it('answers what comes after a number or a message id, in pages that add up to the whole', async () => {
    await using kernel = await GatewayKernel.start({ gateway: ticket });
    await kernel.execute(LINES);
    const whole = await readAll(ticket, kernel.id, '0.0', 4 * 1024 * 1024);
    const paged = await readAll(ticket, kernel.id, '0.0', 8 * 1024);
    expect(paged.pages).toBeGreaterThan(3);
    expect(paged.entries.map((e) => e.n)).toEqual(whole.entries.map((e) => e.n));
    const middle = whole.entries[500] as JournalEntry;
    const afterNumber = await readAll(ticket, kernel.id, `${middle.n[0]}.${middle.n[1]}`, 4 * 1024 * 1024);
    expect(afterNumber.entries.map((e) => e.n)).toEqual(whole.entries.slice(501).map((e) => e.n));
    const afterId = await journal(ticket, kernel.id, `after_msg_id=${middle.msg.header.msg_id}`);
    expect(afterId.entries.map((e) => e.n)).toEqual(whole.entries.slice(501).map((e) => e.n));
    const held = await journal(ticket, kernel.id, `after=0.0&wait_for_msg_id=${middle.msg.header.msg_id}&wait_ms=5000`);
    expect(held.entries.map((e) => e.n)).toEqual(whole.entries.map((e) => e.n));
  });

  it('starts a new generation when the kernel restarts, and keeps the last one readable', async () => {
    await using kernel = await GatewayKernel.start({ gateway: ticket });
    await kernel.execute('print("before")');
    const before = await journal(ticket, kernel.id, 'after=0.0');
    expect(before.last[0]).toBe(1);
    await kernel.restart();
    await kernel.execute('print("after")');
    // The journal is a subscriber of its own: it may be a moment behind what a client's socket delivered.
    const cursor = `${before.last[0]}.${before.last[1]}`;
    let after = await journal(ticket, kernel.id, `after=${cursor}`);
    for (let i = 0; i < 100 && !stdoutOf(after.entries).includes('after'); i++) {
      await new Promise((r) => setTimeout(r, 100));
      after = await journal(ticket, kernel.id, `after=${cursor}`);
    }
    expect(after.lost).toBeNull();
    expect(after.last[0]).toBe(2);
    // The old process's last messages (its shutdown) first, then the new one's, numbered from 1.
    const generations = after.entries.map((e) => e.n[0]);
    expect(generations).toEqual([...generations].sort());
    const second = after.entries.filter((e) => e.n[0] === 2);
    expect(second.map((e) => e.n[1])).toEqual(second.map((_, i) => i + 1));
    expect(stdoutOf(second)).toBe('after\n');
  });

  it('says exactly which numbers fell out of a journal past its bound, for a reader and for a cell', async () => {
    await using kernel = await GatewayKernel.start({ gateway: small });
    await kernel.execute(LINES);
    const all = await journal(small, kernel.id, 'after=0.0');
    expect(all.lost).not.toBeNull();
    const lost = all.lost as { from: Number; to: Number };
    expect(lost.from).toEqual([1, 1]);
    const first = all.entries[0] as JournalEntry;
    expect(first.n).toEqual([lost.to[0], lost.to[1] + 1]);
    const request = all.entries.at(-1)?.msg.parent_header.msg_id as string;
    const cell = await journal(small, kernel.id, `cell=${request}`);
    expect(cell.complete).toBe(true);
    expect(cell.lost).not.toBeNull();
    // What is kept of the cell is its tail, in order, ending with its last line.
    const kept = stdoutOf(cell.entries);
    expect(EXPECTED.endsWith(kept)).toBe(true);
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.length).toBeLessThan(EXPECTED.length);
  });

  it('answers 404 for a kernel it does not know and refuses a request without the token', async () => {
    const missing = await fetch(`${ticket.baseUrl}/api/kernels/00000000-0000-4000-8000-000000000000/journal`, {
      headers: { Authorization: `token ${ticket.token}` },
    });
    expect(missing.status).toBe(404);
    await missing.text();
    await using kernel = await GatewayKernel.start({ gateway: ticket });
    const anonymous = await fetch(`${ticket.baseUrl}/api/kernels/${kernel.id}/journal`);
    expect([401, 403]).toContain(anonymous.status);
    await anonymous.text();
  });
});
