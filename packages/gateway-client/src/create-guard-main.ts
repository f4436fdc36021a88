/**
 * The create guard's process: started detached by `create-guard.ts` (one per process that starts kernels, while it
 * has starts in flight), it sends each `POST /api/kernels` of those starts on the process's behalf over its IPC
 * channel and relays the answer. While the process holds a start open, the guard keeps what it needs to undo it (the
 * create's URL and headers, the chosen id, the id the answer named), in memory only. When the channel closes with
 * starts still open — the process exited, was killed, or crashed — the requester is gone: the guard deletes each open
 * start's kernel (its chosen id at once, then the id of the create's answer once it comes, within `waitMs`), each
 * DELETE retried until the server confirms it, and exits. When the channel closes with nothing open, it exits at once.
 * A create the process sent itself (the guard was not up in time for it) is only watched: the guard deletes its
 * chosen id until a DELETE finds the kernel or `waitMs` passes, and the id its answer named if the process reported
 * one.
 *
 * Self-contained (`node:http`/`node:https` only): it starts in the time of `node -e 0`. Built as an entry of its own
 * (`dist/create-guard-main.js`); its only argument is the pid of the process it serves (for `ps`), never a token.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';

interface CleanupPolicy {
  timeoutMs: number;
  attempts: number;
  initialDelayMs: number;
  maxDelayMs: number;
}

type Inbound =
  | {
      type: 'create';
      n: number;
      url: string;
      headers: Record<string, string>;
      body: string;
      maxResponseBytes: number;
      waitMs: number;
      cleanup: CleanupPolicy;
    }
  | {
      type: 'watch';
      n: number;
      url: string;
      headers: Record<string, string>;
      body: string;
      waitMs: number;
      cleanup: CleanupPolicy;
    }
  | { type: 'created'; n: number; id: string }
  | { type: 'abort'; n: number }
  | { type: 'release'; n: number };

interface Ticket {
  base: string;
  headers: Record<string, string>;
  chosen: string | undefined;
  waitMs: number;
  cleanup: CleanupPolicy;
  /** The create's request, while it is unanswered. */
  inFlight: { abort(): void; answered: Promise<string | undefined> } | undefined;
  /** The id the create's 2xx answer named. */
  created: string | undefined;
  /** The create was sent by the requester itself: only its chosen id, and the id it reported, name its kernel. */
  watched: boolean;
}

const KERNEL_ID = /^[A-Za-z0-9_-]{1,128}$/;
const tickets = new Map<number, Ticket>();
let connected = true;

function send(message: unknown): void {
  if (!connected || !process.send) return;
  try {
    process.send(message);
  } catch {
    // the channel closed meanwhile: the disconnect handler takes over
  }
}

/** One HTTP request; resolves with status and body (read up to `limit` bytes and one more), rejects when unreachable. */
function http(
  url: string,
  method: string,
  headers: Record<string, string>,
  body: string | undefined,
  limit: number,
  signal: AbortSignal,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(target, { method, headers, signal }, (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      let total = 0;
      res.on('data', (chunk: Buffer) => {
        if (total > limit) return;
        chunks.push(chunk);
        total += chunk.length;
        // Past the limit, one byte more is kept: the client refuses an answer longer than its limit.
        if (total > limit) res.destroy();
      });
      const done = () => {
        const all = Buffer.concat(chunks);
        resolve({ status: res.statusCode ?? 0, body: all.subarray(0, limit + 1).toString('utf8') });
      };
      res.on('end', done);
      res.on('close', () => {
        if (res.complete || total > limit) done();
        else reject(new Error('ECONNRESET'));
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** DELETEs kernel `id` until the server confirms it (2xx, 404, 410) or the policy's attempts are spent. */
async function deleteUntilConfirmed(ticket: Ticket, id: string): Promise<void> {
  const { cleanup } = ticket;
  const headers = { ...ticket.headers };
  delete headers['Content-Type'];
  for (let attempt = 1; attempt <= Math.max(1, cleanup.attempts); attempt++) {
    if (attempt > 1) {
      await sleep(Math.min(cleanup.maxDelayMs, cleanup.initialDelayMs * 2 ** (attempt - 2)));
    }
    const signal = cleanup.timeoutMs > 0 ? AbortSignal.timeout(cleanup.timeoutMs) : new AbortController().signal;
    try {
      const res = await http(`${ticket.base}/api/kernels/${id}`, 'DELETE', headers, undefined, 65_536, signal);
      if ((res.status >= 200 && res.status < 300) || res.status === 404 || res.status === 410) return;
    } catch {
      // unreachable or past its deadline: the next attempt
    }
  }
}

/** How often a watched create's chosen id is deleted again while it may still land. */
const WATCH_RETRY_MS = 1_000;

/**
 * A watched create (sent by the requester, whose answer is lost with it): DELETEs its chosen id until one deletes a
 * kernel (2xx: it had landed) or `waitMs` passes (the create never landed under it, or the server ignores the id).
 */
async function reconcileWatched(ticket: Ticket): Promise<void> {
  const chosen = ticket.chosen;
  if (!chosen) return;
  const until = Date.now() + (ticket.waitMs > 0 ? ticket.waitMs : 60_000);
  const headers = { ...ticket.headers };
  delete headers['Content-Type'];
  for (;;) {
    const timeoutMs = ticket.cleanup.timeoutMs > 0 ? ticket.cleanup.timeoutMs : 10_000;
    try {
      const res = await http(
        `${ticket.base}/api/kernels/${chosen}`,
        'DELETE',
        headers,
        undefined,
        65_536,
        AbortSignal.timeout(timeoutMs),
      );
      if (res.status >= 200 && res.status < 300) return;
    } catch {
      // unreachable or past its deadline: again
    }
    if (Date.now() + WATCH_RETRY_MS > until) return;
    await sleep(WATCH_RETRY_MS);
  }
}

/** Undoes an open start whose requester is gone. */
async function reconcile(ticket: Ticket): Promise<void> {
  if (ticket.watched) {
    await Promise.all([
      reconcileWatched(ticket),
      ticket.created !== undefined ? deleteUntilConfirmed(ticket, ticket.created) : undefined,
    ]);
    return;
  }
  const chosen = ticket.chosen;
  const deletes: Promise<void>[] = [];
  if (chosen) deletes.push(deleteUntilConfirmed(ticket, chosen));
  if (ticket.inFlight) {
    const inFlight = ticket.inFlight;
    let bound: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'bound'>((resolve) => {
      if (ticket.waitMs > 0) bound = setTimeout(() => resolve('bound'), ticket.waitMs);
    });
    const outcome = await Promise.race([inFlight.answered, timedOut]);
    clearTimeout(bound);
    if (outcome === 'bound') {
      inFlight.abort();
      // The create may still land under the chosen id (a server that honours it): once more, after the first.
      await Promise.all(deletes);
      if (chosen) deletes.push(deleteUntilConfirmed(ticket, chosen));
    } else if (outcome !== undefined) {
      // Even under the chosen id: the DELETE sent at once may have come before the create landed (a 404).
      deletes.push(deleteUntilConfirmed(ticket, outcome));
    }
  } else if (ticket.created !== undefined && ticket.created !== chosen) {
    deletes.push(deleteUntilConfirmed(ticket, ticket.created));
  }
  await Promise.all(deletes);
}

function watch(message: Extract<Inbound, { type: 'watch' }>): void {
  const suffix = '/api/kernels';
  tickets.set(message.n, {
    base: message.url.endsWith(suffix) ? message.url.slice(0, -suffix.length) : message.url,
    headers: message.headers,
    chosen: chosenId(message.body),
    waitMs: message.waitMs,
    cleanup: message.cleanup,
    inFlight: undefined,
    created: undefined,
    watched: true,
  });
}

function chosenId(body: string): string | undefined {
  try {
    const id = (JSON.parse(body) as { kernel_id?: unknown }).kernel_id;
    return typeof id === 'string' && KERNEL_ID.test(id) ? id : undefined;
  } catch {
    return undefined;
  }
}

function create(message: Extract<Inbound, { type: 'create' }>): void {
  let chosen: string | undefined;
  try {
    const id = (JSON.parse(message.body) as { kernel_id?: unknown }).kernel_id;
    if (typeof id === 'string' && KERNEL_ID.test(id)) chosen = id;
  } catch {
    // a body without an id: only the answer names the kernel
  }
  const suffix = '/api/kernels';
  const base = message.url.endsWith(suffix) ? message.url.slice(0, -suffix.length) : message.url;
  const controller = new AbortController();
  const ticket: Ticket = {
    base,
    headers: message.headers,
    chosen,
    waitMs: message.waitMs,
    cleanup: message.cleanup,
    inFlight: undefined,
    created: undefined,
    watched: false,
  };
  const answered = http(message.url, 'POST', message.headers, message.body, message.maxResponseBytes, controller.signal)
    .then(
      (res) => {
        let created: string | undefined;
        if (res.status >= 200 && res.status < 300) {
          try {
            const id = (JSON.parse(res.body) as { id?: unknown }).id;
            if (typeof id === 'string' && KERNEL_ID.test(id)) created = id;
          } catch {
            // not a kernel model: the client says so; nothing to delete by
          }
        }
        ticket.created = created;
        send({ type: 'answer', n: message.n, status: res.status, body: res.body });
        return created;
      },
      (error: unknown) => {
        const cause = (error as { code?: unknown })?.code;
        send({
          type: 'error',
          n: message.n,
          message: typeof cause === 'string' ? cause : String((error as Error)?.message ?? error),
        });
        return undefined;
      },
    )
    .finally(() => {
      ticket.inFlight = undefined;
    });
  ticket.inFlight = { abort: () => controller.abort(), answered };
  tickets.set(message.n, ticket);
}

process.on('message', (message: Inbound) => {
  if (message.type === 'create') create(message);
  else if (message.type === 'watch') watch(message);
  else if (message.type === 'created') {
    const ticket = tickets.get(message.n);
    if (ticket && KERNEL_ID.test(message.id)) ticket.created = message.id;
  } else if (message.type === 'abort') tickets.get(message.n)?.inFlight?.abort();
  else if (message.type === 'release') {
    const ticket = tickets.get(message.n);
    tickets.delete(message.n);
    ticket?.inFlight?.abort();
  }
});

process.on('disconnect', () => {
  connected = false;
  const open = [...tickets.values()];
  tickets.clear();
  void Promise.allSettled(open.map(reconcile)).then(() => process.exit(0));
});

// Detached from the requester's terminal: a Ctrl-C or SIGHUP meant for it does not stop the undo.
process.on('SIGINT', () => {});
process.on('SIGHUP', () => {});
send({ type: 'ready' });
