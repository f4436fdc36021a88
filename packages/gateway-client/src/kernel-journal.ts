import { type ExecuteResult, emptyResult, KernelwardenError, lazy } from '@kernelwarden/core';
import type { z } from 'zod/v3';
import { CellOutput, DEFAULT_OUTPUT_CAPS, type OutputCaps } from './cell-output.js';
import { asRecord, toError } from './execution.js';
import type { GatewayClient, KernelModel, RequestOptions } from './gateway-client.js';
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
export function kernelJournalCapability(model: KernelModel | undefined): KernelJournalCapability | undefined {
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

/** The kernel has no journal this client can read (another server, or one without it): nothing can be collected. */
export class KernelJournalUnavailableError extends KernelwardenError {
  static override readonly brand: string = 'KernelJournalUnavailableError';
  /** The kernel asked about. */
  readonly kernelId: string;

  constructor(message: string, options: { kernelId: string }) {
    super(message, { code: 'KERNEL_JOURNAL_UNAVAILABLE' });
    this.kernelId = options.kernelId;
  }
}

/** A cell's output read back from its kernel's journal. */
export interface CollectedCell extends ExecuteResult {
  /** The journal holds the cell's `status: idle`: the output is the cell's whole output (unless `lost`). */
  complete: boolean;
  /** Numbers that fell out of the journal's retention and may have held some of the cell's output. */
  lost?: { from: JournalNumber; to: JournalNumber };
}

/** Options of `collectCell()`. */
export interface CollectCellOptions extends RequestOptions {
  /**
   * How long to wait for the cell to finish; `0` reads once. The result says `complete: false` (and `timedOut`)
   * when it did not finish in time. @defaultValue `0`
   */
  waitMs?: number;
  /** How often to look again while the cell runs. @defaultValue `100` */
  pollMs?: number;
  /** How much of the output the result keeps. @defaultValue `DEFAULT_OUTPUT_CAPS` */
  outputCaps?: Partial<OutputCaps>;
}

/**
 * A cell's output collected from its kernel's journal by the `msg_id` of its `execute_request`, from any process
 * holding the gateway's token: what the cell printed, displayed and raised, in order, from its first message — also
 * while it still runs (`complete: false`) and after the process that sent it went away. `status` is `'error'` when
 * the cell raised. `outputDropped` and `lost` say when part of it fell out of the journal's retention.
 *
 * Throws `KernelJournalUnavailableError` when the kernel's server keeps no journal (a stock jupyter-server).
 */
export async function collectCell(
  client: GatewayClient,
  kernelId: string,
  msgId: string,
  opts: CollectCellOptions = {},
): Promise<CollectedCell> {
  const request: RequestOptions = {};
  if (opts.signal !== undefined) request.signal = opts.signal;
  if (opts.timeoutMs !== undefined) request.timeoutMs = opts.timeoutMs;
  if (!kernelJournalCapability(await client.getKernel(kernelId, request))) {
    throw new KernelJournalUnavailableError(
      `Kernel ${kernelId} on ${client.baseUrl} has no journal: only the embedded gateway (@kernelwarden/local-gateway) keeps one`,
      { kernelId },
    );
  }
  const output = new CellOutput({ ...DEFAULT_OUTPUT_CAPS, ...opts.outputCaps });
  const until = Date.now() + (opts.waitMs ?? 0);
  const pollMs = opts.pollMs ?? 100;
  let after: JournalNumber = [0, 0];
  let complete = false;
  let failed = false;
  let error: ExecuteResult['error'];
  let executionCount: number | undefined;
  let lost: CollectedCell['lost'];
  for (;;) {
    const page = await client.kernelJournal(kernelId, { cell: msgId, after }, request);
    if (page === undefined && Date.now() >= until) break;
    if (page !== undefined) {
      if (page.lost !== null && lost === undefined) lost = { from: page.lost.from, to: page.lost.to };
      for (const { n, msg } of page.entries) {
        after = n;
        const content = msg.content;
        switch (msg.header.msg_type) {
          case 'execute_input':
            if (typeof content.execution_count === 'number') executionCount = content.execution_count;
            break;
          case 'stream':
            output.stream(content.name === 'stderr' ? 'stderr' : 'stdout', String(content.text ?? ''));
            break;
          case 'display_data':
          case 'update_display_data':
            output.rich({ type: 'display_data', data: asRecord(content.data), metadata: asRecord(content.metadata) });
            break;
          case 'execute_result':
            output.rich({
              type: 'execute_result',
              data: asRecord(content.data),
              metadata: asRecord(content.metadata),
              ...(typeof content.execution_count === 'number' ? { executionCount: content.execution_count } : {}),
            });
            break;
          case 'error':
            failed = true;
            error ??= toError(content);
            output.rich({ type: 'error', ...toError(content) });
            break;
          default:
            break;
        }
      }
      if (page.more) continue;
      complete = page.complete === true;
    }
    if (complete || Date.now() >= until) break;
    opts.signal?.throwIfAborted();
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
  const result: CollectedCell = {
    ...emptyResult(msgId, output.collected()),
    status: failed ? 'error' : 'ok',
    complete,
    timedOut: !complete && (opts.waitMs ?? 0) > 0,
  };
  if (error !== undefined) result.error = error;
  if (executionCount !== undefined) result.executionCount = executionCount;
  if (lost !== undefined) {
    result.lost = lost;
    result.outputDropped = true;
  }
  return result;
}
