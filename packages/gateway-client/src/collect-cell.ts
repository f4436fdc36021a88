import { type ExecuteResult, emptyResult, KernelwardenError } from '@kernelwarden/core';
import { CellOutput, DEFAULT_OUTPUT_CAPS, type OutputCaps } from './cell-output.js';
import { asRecord, toError } from './execution.js';
import type { GatewayClient, RequestOptions } from './gateway-client.js';
import { type JournalNumber, type KernelJournalPage, kernelJournalCapability } from './kernel-journal.js';

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
  const cell = new CellSoFar({ ...DEFAULT_OUTPUT_CAPS, ...opts.outputCaps });
  const until = Date.now() + (opts.waitMs ?? 0);
  const pollMs = opts.pollMs ?? 100;
  let after: JournalNumber = [0, 0];
  let complete = false;
  let lost: CollectedCell['lost'];
  for (;;) {
    const page = await client.kernelJournal(kernelId, { cell: msgId, after }, request);
    if (page === undefined && Date.now() >= until) break;
    if (page !== undefined) {
      if (page.lost !== null && lost === undefined) lost = { from: page.lost.from, to: page.lost.to };
      for (const { n, msg } of page.entries) {
        after = n;
        cell.take(msg);
      }
      if (page.more) continue;
      complete = page.complete === true;
    }
    if (complete || Date.now() >= until) break;
    opts.signal?.throwIfAborted();
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
  const result: CollectedCell = {
    ...emptyResult(msgId, cell.output.collected()),
    status: cell.failed ? 'error' : 'ok',
    complete,
    timedOut: !complete && (opts.waitMs ?? 0) > 0,
  };
  if (cell.error !== undefined) result.error = cell.error;
  if (cell.executionCount !== undefined) result.executionCount = cell.executionCount;
  if (lost !== undefined) {
    result.lost = lost;
    result.outputDropped = true;
  }
  return result;
}

/** What a cell's journal entries read so far add up to: its output, its error, its execution count. */
class CellSoFar {
  readonly output: CellOutput;
  failed = false;
  error: ExecuteResult['error'];
  executionCount: number | undefined;

  constructor(caps: OutputCaps) {
    this.output = new CellOutput(caps);
  }

  /** Takes one iopub message of the cell, in journal order. */
  take(msg: KernelJournalPage['entries'][number]['msg']): void {
    const content = msg.content;
    switch (msg.header.msg_type) {
      case 'execute_input':
        if (typeof content.execution_count === 'number') this.executionCount = content.execution_count;
        break;
      case 'stream':
        this.output.stream(content.name === 'stderr' ? 'stderr' : 'stdout', String(content.text ?? ''));
        break;
      case 'display_data':
      case 'update_display_data':
        this.output.rich({ type: 'display_data', data: asRecord(content.data), metadata: asRecord(content.metadata) });
        break;
      case 'execute_result':
        this.output.rich({
          type: 'execute_result',
          data: asRecord(content.data),
          metadata: asRecord(content.metadata),
          ...(typeof content.execution_count === 'number' ? { executionCount: content.execution_count } : {}),
        });
        break;
      case 'error':
        this.failed = true;
        this.error ??= toError(content);
        this.output.rich({ type: 'error', ...toError(content) });
        break;
      default:
        break;
    }
  }
}
