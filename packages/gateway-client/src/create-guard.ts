import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { GatewayAnswer, GatewayRequest } from './gateway-client-options.js';
import type { CleanupRetryPolicy } from './start-cleanup.js';

/**
 * One start's create, sent by the create guard's process: `request` sends the `POST /api/kernels` (once), and the
 * guard deletes the start's kernel should this process end before `release()` — the start returned its kernel, or
 * finished cleaning up after itself.
 */
export interface CreateTicket {
  readonly request: GatewayRequest;
  release(): void;
  /** Waits at most `ms` for the guard to be up, so that `request` goes through it. */
  waitForGuard(ms: number): Promise<void>;
}

/** What the guard needs to undo a start whose process is gone. */
export interface CreateTicketOptions {
  /** How long the guard still awaits an unanswered create once this process is gone (`abandonedCreateWaitMs`; 0: no bound). */
  waitMs: number;
  /** Each DELETE's bound (`cleanupTimeoutMs`; 0: none). */
  cleanupTimeoutMs: number;
  /** DELETEs until one is confirmed (`cleanupRetry`). */
  cleanupRetry: CleanupRetryPolicy;
}

/** The file name of the guard's built entry (`src/create-guard-main.ts`). */
const ENTRY_NAME = 'create-guard-main.js';

/** The longest the guard's process may take to say it is ready before starts go without it. */
export const CREATE_GUARD_READY_TIMEOUT_MS = 15_000;

/**
 * The guard's built entry: beside this module in `dist/` (run from the sources, as the tests do, in the package's
 * build); bundled into an application's single file, in the installed package.
 */
export function createGuardEntry(): string | undefined {
  const here = import.meta.url;
  const beside = fileURLToPath(new URL(here.endsWith('.ts') ? `../dist/${ENTRY_NAME}` : `./${ENTRY_NAME}`, here));
  if (existsSync(beside)) return beside;
  try {
    const manifest = createRequire(here).resolve('@kernelwarden/gateway-client/package.json');
    const installed = join(dirname(manifest), 'dist', ENTRY_NAME);
    if (existsSync(installed)) return installed;
  } catch {
    // not installed where this bundle is
  }
  return undefined;
}

type Outbound =
  | { type: 'ready' }
  | { type: 'answer'; n: number; status: number; body: string }
  | { type: 'error'; n: number; message: string };

interface Pending {
  resolve(answer: GatewayAnswer): void;
  reject(error: Error): void;
}

/** The guard's process while this process has starts open. */
interface Guard {
  readonly child: ChildProcess;
  readonly ready: Promise<boolean>;
  /** Tickets open (released ones are not). */
  open: number;
  next: number;
  readonly pending: Map<number, Pending>;
  gone: boolean;
}

let current: Guard | undefined;

/** The `fetch` installed when this module loaded: one put in its place later (a test's hook) is not bypassed. */
const LOADED_FETCH = globalThis.fetch;

/**
 * Whether a start on `client` sends its create through the guard: the client's `createGuard`, unless
 * `globalThis.fetch` was replaced since this package loaded (a test's hook, such as testkit's `hookFetch`): the client
 * looks `fetch` up at each call, so that hook answers its create instead.
 */
export function guardsCreates(client: { readonly createGuard: boolean }): boolean {
  return client.createGuard && globalThis.fetch === LOADED_FETCH;
}
let warned = false;

/** Variables the guard's HTTP needs from this process (TLS trust); nothing else of the environment is passed. */
const PASSED_ENV = ['PATH', 'NODE_EXTRA_CA_CERTS', 'NODE_TLS_REJECT_UNAUTHORIZED', 'SSL_CERT_FILE', 'SSL_CERT_DIR'];

function startGuard(entry: string): Guard {
  const env: NodeJS.ProcessEnv = {};
  for (const name of PASSED_ENV) if (process.env[name] !== undefined) env[name] = process.env[name];
  const child = spawn(process.execPath, [entry, String(process.pid)], {
    detached: true,
    stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
    env,
    serialization: 'json',
  });
  // Only the channel keeps this process alive, and only while starts are open.
  child.unref();
  let settleReady!: (ok: boolean) => void;
  const guard: Guard = {
    child,
    ready: new Promise<boolean>((resolve) => {
      settleReady = resolve;
    }),
    open: 0,
    next: 1,
    pending: new Map(),
    gone: false,
  };
  const readyTimer = setTimeout(() => {
    settleReady(false);
    end(guard);
    guard.child.kill('SIGKILL');
  }, CREATE_GUARD_READY_TIMEOUT_MS);
  readyTimer.unref();
  child.on('message', (message: Outbound) => {
    if (message.type === 'ready') {
      clearTimeout(readyTimer);
      settleReady(true);
      return;
    }
    const waiting = guard.pending.get(message.n);
    if (!waiting) return;
    guard.pending.delete(message.n);
    if (message.type === 'answer') {
      const body = message.body;
      waiting.resolve({ status: message.status, text: async () => body });
    } else {
      waiting.reject(new Error(`the create guard could not reach the gateway (${message.message})`));
    }
  });
  const lost = () => {
    clearTimeout(readyTimer);
    settleReady(false);
    guard.gone = true;
    if (current === guard) current = undefined;
    for (const waiting of guard.pending.values()) waiting.reject(new Error('the create guard process exited'));
    guard.pending.clear();
  };
  child.on('error', lost);
  child.once('exit', lost);
  return guard;
}

/** Closes the channel: the guard exits (undoing nothing, since no start is open); the next start starts another. */
function end(guard: Guard): void {
  if (current === guard) current = undefined;
  guard.gone = true;
  try {
    if (guard.child.connected) guard.child.disconnect();
  } catch {
    // already closed
  }
}

/** Sends a message to the guard; a closed channel is not an error here (its loss is handled on `exit`). */
function post(guard: Guard, message: unknown): void {
  if (guard.gone || !guard.child.connected) return;
  guard.child.send(message as object, () => {
    // a send that failed: the channel closed, and the guard's exit settles what was pending
  });
}

/**
 * Opens a ticket for one create: starts the guard's process if none runs (concurrent starts share it). Undefined when
 * the guard cannot run (its entry is missing from a bundle): the create is then sent by this process, and a warning
 * says once that a process exiting mid-create may leave its kernel.
 *
 * `request` sends the create through the guard when the guard is up by then (`waitForGuard` waits for it, within a
 * bound). Otherwise — a start whose deadline leaves too little time to wait for it, or a guard that did not come up
 * within `CREATE_GUARD_READY_TIMEOUT_MS` — this process sends the create itself (with `globalThis.fetch`) and the guard,
 * once up, only watches it: it learns the create's URL, headers and chosen id, then the id its answer names, and if
 * this process is gone first it deletes the chosen id until a DELETE finds the kernel or `waitMs` passes.
 */
export function openCreateTicket(opts: CreateTicketOptions): CreateTicket | undefined {
  let guard = current;
  if (!guard || guard.gone) {
    const entry = createGuardEntry();
    if (entry === undefined) return unguarded('its entry dist/create-guard-main.js is missing');
    guard = startGuard(entry);
    current = guard;
  }
  guard.open++;
  const n = guard.next++;
  const g = guard;
  let released = false;
  let up = false;
  /** Messages for the guard, held until it is up. */
  let held: unknown[] | undefined = [];
  const tell = (message: unknown) => {
    if (held) held.push(message);
    else post(g, message);
  };
  void g.ready.then((ok) => {
    up = ok && !released;
    const queued = held ?? [];
    held = undefined;
    if (!ok) {
      unguarded('its process did not start');
      return;
    }
    for (const message of queued) post(g, message);
  });
  const release = () => {
    if (released) return;
    released = true;
    g.pending.delete(n);
    tell({ type: 'release', n });
    // Nothing left to undo: the guard exits now (the next start starts another).
    if (--g.open === 0) {
      if (held) void g.ready.then(() => g.open === 0 && end(g));
      else end(g);
    }
  };
  const cleanup = { timeoutMs: opts.cleanupTimeoutMs, ...opts.cleanupRetry };
  let used = false;
  const request: GatewayRequest = (url, init) => {
    if (used || released) return Promise.reject(new Error('a create ticket sends one create'));
    used = true;
    const limit = init.maxResponseBytes ?? 8 * 1024 * 1024;
    if (!up || g.gone) {
      tell({ type: 'watch', n, url, headers: init.headers, body: init.body ?? '', waitMs: opts.waitMs, cleanup });
      return sendHere(url, init, limit).then((answer) => {
        const id = answer.status >= 200 && answer.status < 300 ? modelId(answer.body) : undefined;
        if (id !== undefined && !released) tell({ type: 'created', n, id });
        return { status: answer.status, text: async () => answer.body };
      });
    }
    return sendThroughGuard(g, n, init, {
      type: 'create',
      n,
      url,
      headers: init.headers,
      body: init.body ?? '',
      maxResponseBytes: limit,
      waitMs: opts.waitMs,
      cleanup,
    });
  };
  const waitForGuard = async (ms: number): Promise<void> => {
    if (up || ms <= 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([g.ready, new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
    clearTimeout(timer);
  };
  return { request, release, waitForGuard };
}

/**
 * Has the guard send create `n` (`message`) and resolves with its answer; an abort of `init.signal` tells the guard
 * to give it up and rejects with the signal's reason.
 */
function sendThroughGuard(
  g: Guard,
  n: number,
  init: Parameters<GatewayRequest>[1],
  message: unknown,
): Promise<GatewayAnswer> {
  return new Promise<GatewayAnswer>((resolve, reject) => {
    const onAbort = () => {
      g.pending.delete(n);
      post(g, { type: 'abort', n });
      reject(init.signal.reason);
    };
    if (init.signal.aborted) {
      onAbort();
      return;
    }
    init.signal.addEventListener('abort', onAbort, { once: true });
    const done = () => init.signal.removeEventListener('abort', onAbort);
    g.pending.set(n, {
      resolve: (answer) => {
        done();
        resolve(answer);
      },
      reject: (error) => {
        done();
        reject(error);
      },
    });
    post(g, message);
  });
}

/** The id of a kernel model's JSON, when it is one. */
function modelId(body: string): string | undefined {
  try {
    const id = (JSON.parse(body) as { id?: unknown }).id;
    return typeof id === 'string' && /^[A-Za-z0-9_-]{1,128}$/.test(id) ? id : undefined;
  } catch {
    return undefined;
  }
}

/** The create sent by this process (`globalThis.fetch`), its body read up to `limit` bytes and one more. */
async function sendHere(
  url: string,
  init: Parameters<GatewayRequest>[1],
  limit: number,
): Promise<{ status: number; body: string }> {
  const response = await globalThis.fetch(url, {
    method: init.method,
    headers: init.headers,
    ...(init.body === undefined ? {} : { body: init.body }),
    signal: init.signal,
  });
  const reader = response.body?.getReader();
  if (!reader) return { status: response.status, body: '' };
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    total += value.byteLength;
    if (total > limit) {
      // One byte more than the limit is kept: the client refuses the answer as too large.
      reader.cancel().catch(() => {});
      break;
    }
  }
  return {
    status: response.status,
    body: Buffer.concat(chunks)
      .subarray(0, limit + 1)
      .toString('utf8'),
  };
}

function unguarded(why: string): undefined {
  if (!warned) {
    warned = true;
    process.emitWarning(
      `The kernel create guard cannot run (${why}): starts send their creates themselves, and a process that exits while its create is in flight may leave the kernel running on a server that does not drop it`,
      { code: 'KERNELWARDEN_CREATE_GUARD' },
    );
  }
  return undefined;
}

/** The pid of the guard's process while one runs (for tests and diagnostics). */
export function createGuardPid(): number | undefined {
  return current && !current.gone ? current.child.pid : undefined;
}
