import { lazy } from '@kernelwarden/core';
import type { z } from 'zod/v3';
import { asRecord } from './execution.js';
import { zod } from './zod.js';

/** A kernel journal's number: `[generation, seq]` (see docs/journal-protocol.md). */
export type JournalNumber = readonly [number, number];

/** What a kernel model says of its journal, on a server that keeps one (the embedded gateway). */
export interface KernelJournalCapability {
  /** The journal protocol's version. */
  version: number;
  /** The most the kernel's journal keeps, in the kernel's bytes on the wire. */
  maxBytes: number;
  /** How long the kernel's journal keeps a message. */
  maxAgeMs: number;
}

/** The journal protocol version this client reads. */
export const KERNEL_JOURNAL_VERSION = 1;

/** The kernel's journal, when its model says it has one this client can read; undefined otherwise. */
export function kernelJournalCapability(
  model: Readonly<Record<string, unknown>> | undefined,
): KernelJournalCapability | undefined {
  const offer = asRecord(model?.kernelwarden_journal);
  if (offer.version !== KERNEL_JOURNAL_VERSION) return undefined;
  const maxBytes = typeof offer.max_bytes === 'number' ? offer.max_bytes : 0;
  const maxAgeMs = typeof offer.max_age_ms === 'number' ? offer.max_age_ms : 0;
  return { version: KERNEL_JOURNAL_VERSION, maxBytes, maxAgeMs };
}

function pageSchema(zz: typeof z) {
  const number = zz.tuple([zz.number().int().nonnegative(), zz.number().int().nonnegative()]);
  const header = zz.object({ msg_id: zz.string(), msg_type: zz.string() }).passthrough();
  return zz.object({
    kernel_id: zz.string(),
    last: number,
    lost: zz.object({ from: number, to: number }).nullable(),
    more: zz.boolean(),
    held: zz.object({ entries: zz.number().int().nonnegative(), bytes: zz.number().int().nonnegative() }).optional(),
    complete: zz.boolean().optional(),
    entries: zz.array(
      zz.object({
        n: number,
        msg: zz.object({
          header,
          parent_header: zz.object({ msg_id: zz.string().optional() }).passthrough(),
          metadata: zz.record(zz.string(), zz.unknown()),
          content: zz.record(zz.string(), zz.unknown()),
          buffers: zz.array(zz.string()).optional(),
          channel: zz.string().optional(),
        }),
      }),
    ),
  });
}

/** The page schema, built on first use (importing this module does not load zod). */
export const kernelJournalPageSchema = lazy(() => pageSchema(zod().z));

/** One answer of `GET /api/kernels/<id>/journal`. */
export type KernelJournalPage = z.output<ReturnType<typeof pageSchema>>;

/** What `GatewayClient.kernelJournal()` asks for. */
export interface KernelJournalQuery {
  /** Messages numbered after this one (default: from the start). */
  after?: JournalNumber;
  /** Messages after the one with this id (instead of `after`). */
  afterMsgId?: string;
  /** Only the messages of the cell whose `execute_request` had this id. */
  cell?: string;
  /** Answer once the journal holds this message, or `waitMs` passed. */
  waitForMsgId?: string;
  /** How long `waitForMsgId` may hold the answer (the server allows 10 s at most). */
  waitMs?: number;
  /** The largest answer, in bytes (the server's default is 4 MiB). */
  maxBytes?: number;
}

/** The query string of a journal read. */
export function kernelJournalSearch(query: KernelJournalQuery): string {
  const params = new URLSearchParams();
  if (query.cell !== undefined) params.set('cell', query.cell);
  if (query.afterMsgId !== undefined) params.set('after_msg_id', query.afterMsgId);
  if (query.after !== undefined) params.set('after', `${query.after[0]}.${query.after[1]}`);
  if (query.waitForMsgId !== undefined) params.set('wait_for_msg_id', query.waitForMsgId);
  if (query.waitMs !== undefined) params.set('wait_ms', String(Math.max(0, Math.floor(query.waitMs))));
  if (query.maxBytes !== undefined) params.set('max_bytes', String(Math.max(1, Math.floor(query.maxBytes))));
  return params.toString();
}
