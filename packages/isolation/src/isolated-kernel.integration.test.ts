import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LocalGateway, type LocalGatewayTicket } from '@kernelwarden/local-gateway';
import { kernelPids, processesMentioning, startTestServer, testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { IsolationUnavailableError } from './errors.js';
import { prepareIsolatedKernel } from './gateway-kernelspec.js';
import { type BaseKernelSpec, installIsolatedKernelSpec } from './kernelspec.js';
import { createReadIsolationPolicy, type IsolationPolicy } from './policy.js';

// A minimal Jupyter client (REST + legacy JSON channels): enough to drive a real kernel, nothing more.

interface Reply {
  status: string;
  stdout: string;
  stderr: string;
  ename?: string;
}

type Server = { baseUrl: string; token: string };

async function rest(server: Server, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${server.baseUrl}${path}`, {
    method,
    headers: { Authorization: `token ${server.token}`, 'Content-Type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${await res.text()}`);
  return res.status === 204 ? undefined : res.json();
}

class Channel {
  private readonly session = randomUUID();
  private readonly waiters = new Map<string, (msg: any) => void>();

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data));
      this.waiters.get(msg.parent_header?.msg_id)?.(msg);
    });
  }

  static async open(server: Server, kernelId: string): Promise<Channel> {
    const url = `${server.baseUrl.replace('http', 'ws')}/api/kernels/${kernelId}/channels`;
    const ws = new WebSocket(url, { headers: { Authorization: `token ${server.token}` } });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    const channel = new Channel(ws);
    // Like jupyter's own nudge: a socket opened on a kernel that just (re)started may miss the iopub messages of its
    // first request (ZMQ's slow joiner), so kernel_info is asked again until one is answered on both channels.
    for (let attempt = 1; ; attempt++) {
      try {
        await channel.request('kernel_info_request', {}, 2_000);
        return channel;
      } catch (error) {
        if (attempt >= 30) throw error;
      }
    }
  }

  /** Sends a shell request and resolves once its reply and the kernel's `idle` for it both arrived. */
  request(msgType: string, content: object, timeoutMs = 60_000, onBusy?: () => void): Promise<Reply> {
    const msgId = randomUUID();
    const reply: Reply = { status: '', stdout: '', stderr: '' };
    return new Promise<Reply>((resolve, reject) => {
      let replied = false;
      let idle = false;
      const timer = setTimeout(() => {
        this.waiters.delete(msgId);
        reject(new Error(`${msgType} got no reply in ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.set(msgId, (msg) => {
        const type = msg.header.msg_type;
        if (type === 'stream') reply[msg.content.name === 'stderr' ? 'stderr' : 'stdout'] += msg.content.text;
        if (type === 'error') reply.ename = msg.content.ename;
        if (type === 'status' && msg.content.execution_state === 'busy') onBusy?.();
        if (type === 'status' && msg.content.execution_state === 'idle') idle = true;
        if (type.endsWith('_reply')) {
          replied = true;
          reply.status = msg.content.status;
          reply.ename ??= msg.content.ename;
        }
        if (replied && idle) {
          clearTimeout(timer);
          this.waiters.delete(msgId);
          resolve(reply);
        }
      });
      this.ws.send(
        JSON.stringify({
          header: { msg_id: msgId, username: 'test', session: this.session, msg_type: msgType, version: '5.3' },
          parent_header: {},
          metadata: {},
          content,
          channel: 'shell',
          buffers: [],
        }),
      );
    });
  }

  execute(code: string, timeoutMs = 60_000, onBusy?: () => void): Promise<Reply> {
    return this.request(
      'execute_request',
      { code, silent: false, store_history: false, user_expressions: {}, allow_stdin: false, stop_on_error: true },
      timeoutMs,
      onBusy,
    );
  }

  close(): void {
    this.ws.close();
  }
}

async function waitUntil(check: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
  return true;
}

// The staged machine: a fake system temp, two hidden roots (one with an allowed folder inside), and the embedded
// LocalGateway (its state under the test root), whose kernelSpecDir receives the isolated kernelspecs.

let base: string;
let server: LocalGatewayTicket;
let kernelSpecDir: string;
let policy: IsolationPolicy;
let specs: Record<string, BaseKernelSpec>;
const paths = {
  systmp: '',
  vault: '',
  secret: '',
  hidden: '',
  allowed: '',
  allowedFile: '',
  state: '',
};

beforeAll(async () => {
  base = mkdtempSync(join(testGateway().root, 'isolation-'));
  paths.systmp = join(base, 'systmp');
  paths.vault = join(base, 'vault');
  paths.secret = join(paths.vault, 'secret.txt');
  paths.hidden = join(base, 'hidden');
  paths.allowed = join(paths.hidden, 'shared');
  paths.allowedFile = join(paths.allowed, 'allowed.txt');
  for (const dir of [paths.systmp, paths.vault, paths.allowed]) mkdirSync(dir, { recursive: true });
  writeFileSync(paths.secret, 'TOP-SECRET\n');
  writeFileSync(join(paths.hidden, 'other.txt'), 'OTHER\n');
  writeFileSync(paths.allowedFile, 'ALLOWED\n');
  writeFileSync(join(paths.systmp, 'host-file.txt'), 'HOST TEMP\n');
  policy = createReadIsolationPolicy({
    roots: [
      { path: paths.vault, label: 'vault' },
      { path: paths.hidden, label: 'hidden data' },
    ],
    allowedRoots: [{ path: paths.allowed, label: 'shared inputs' }],
    tempDir: paths.systmp,
  });
  server = await LocalGateway.acquire({ stateDir: join(base, 'state'), lingerMs: 0 });
  kernelSpecDir = server.kernelSpecDir;
  paths.state = server.stateDir;
  const listing = await rest(server, 'GET', '/api/kernelspecs');
  specs = {};
  for (const [name, entry] of Object.entries<any>(listing.kernelspecs)) specs[name] = { name, ...entry.spec };
}, 120_000);

afterAll(async () => {
  await server?.release();
});

function workspaceFor(name: string): string {
  const ws = join(base, `ws-${name}`);
  mkdirSync(ws);
  symlinkSync(paths.secret, join(ws, 'peek'));
  symlinkSync(paths.vault, join(ws, 'peekdir'));
  return ws;
}

const PROBE = {
  python3: (p: typeof paths) => `
import json, os
def read(p):
    try:
        with open(p) as f:
            return f.read().strip()
    except Exception as e:
        return 'ERR'
def ls(p):
    try:
        return sorted(os.listdir(p))
    except Exception:
        return 'ERR'
r = {}
r['secret'] = read(${JSON.stringify(p.secret)})
r['link'] = read('peek')
r['vault'] = ls(${JSON.stringify(p.vault)})
r['linkdir'] = ls('peekdir')
r['hidden'] = ls(${JSON.stringify(p.hidden)})
r['allowed'] = read(${JSON.stringify(p.allowedFile)})
with open('written.txt', 'w') as f:
    f.write('hello')
r['systmp'] = ls(${JSON.stringify(p.systmp)})
with open(os.path.join(os.environ['TMPDIR'], 'mine.txt'), 'w') as f:
    f.write('x')
r['token'] = 'JUPYTER_TOKEN' in os.environ
from ipykernel.connect import get_connection_file
r['runtime'] = ls(os.path.dirname(get_connection_file()))
r['procs'] = len([e for e in os.listdir('/proc') if e.isdigit()])
r['state'] = ls(${JSON.stringify(p.state)})
print(json.dumps(r))
`,
  ir: (p: typeof paths) => `
rd <- function(p) tryCatch(paste(readLines(p, warn = FALSE), collapse = ''), error = function(e) 'ERR', warning = function(w) 'ERR')
ls <- function(p) if (dir.exists(p)) sort(list.files(p, all.files = TRUE, no.. = TRUE)) else 'ERR'
q <- function(x) paste0('"', x, '"')
arr <- function(x) paste0('[', paste(q(x), collapse = ','), ']')
writeLines('hello', 'written.txt')
writeLines('x', file.path(Sys.getenv('TMPDIR'), 'mine.txt'))
cat(paste0('{"secret":', q(rd(${JSON.stringify(p.secret)})), ',"link":', q(rd('peek')),
  ',"vault":', arr(ls(${JSON.stringify(p.vault)})), ',"linkdir":', arr(ls('peekdir')),
  ',"hidden":', arr(ls(${JSON.stringify(p.hidden)})), ',"allowed":', q(rd(${JSON.stringify(p.allowedFile)})),
  ',"systmp":', arr(ls(${JSON.stringify(p.systmp)})), ',"token":', tolower(Sys.getenv('JUPYTER_TOKEN') != ''), '}\\n'))
`,
};

const SLEEP = { python3: 'import time\ntime.sleep(60)', ir: 'Sys.sleep(60)' };

describe.each(['python3', 'ir'] as const)('an isolated %s kernel through a local jupyter-server', (language) => {
  let ws: string;
  let kernelId: string | undefined;
  let channel: Channel | undefined;

  beforeAll(async () => {
    ws = workspaceFor(language);
    const name =
      language === 'python3'
        ? await prepareIsolatedKernel({
            gateway: { baseUrl: server.baseUrl, token: server.token, kernelSpecDir },
            kernelName: language,
            policy,
            workspace: ws,
            privateTemp: [paths.systmp],
            hide: [server.stateDir],
          })
        : await installIsolatedKernelSpec({
            kernelSpecDir,
            baseSpec: specs[language]!,
            policy,
            workspace: ws,
            privateTemp: [paths.systmp],
            hide: [server.stateDir],
          });
    expect(existsSync(join(kernelSpecDir, name, 'kernel.json'))).toBe(true);
    const kernel = await rest(server, 'POST', '/api/kernels', { name });
    kernelId = kernel.id as string;
    channel = await Channel.open(server, kernelId);
  }, 120_000);

  afterAll(async () => {
    channel?.close();
    if (kernelId) await rest(server, 'DELETE', `/api/kernels/${kernelId}`);
  });

  async function probe(): Promise<Record<string, unknown>> {
    const reply = await channel!.execute(PROBE[language](paths));
    expect(reply.status, reply.stderr).toBe('ok');
    return JSON.parse(reply.stdout.trim().split('\n').at(-1)!);
  }

  it('cannot read a hidden root (open, listing, symlink in the workspace) but reads the allowed file, writes its workspace, and has a private temp', async () => {
    const seen = await probe();
    expect(seen).toMatchObject({
      secret: 'ERR',
      link: 'ERR',
      allowed: 'ALLOWED',
      token: false,
    });
    // The vault lists empty (R prints an empty vector as [""]); the other root shows only the way to the allowed folder.
    expect(seen.vault).toSatisfy((v: unknown) => JSON.stringify(v) === '[]' || JSON.stringify(v) === '[""]');
    expect(seen.linkdir).toSatisfy((v: unknown) => JSON.stringify(v) === '[]' || JSON.stringify(v) === '[""]');
    expect(seen.hidden).toEqual(['shared']);
    expect(seen.systmp).not.toContain('host-file.txt');
    expect(readFileSync(join(ws, 'written.txt'), 'utf8').trim()).toBe('hello');
    expect(readdirSync(paths.systmp)).toEqual(['host-file.txt']);
    if (language === 'python3') {
      // The gateway's runtime dir (other kernels' keys, the server's token file) shows only this kernel's file,
      // and the private PID namespace shows only the sandbox's own processes.
      expect(seen.runtime).toEqual([`kernel-${kernelId}.json`]);
      // LocalGateway's state (its token file) is hidden too; only the way to the connection file shows.
      expect(seen.state).toEqual(['runtime']);
      expect(seen.procs).toBeLessThanOrEqual(4);
    }
  });

  it('is interrupted by the gateway and keeps running', async () => {
    let busy!: () => void;
    const started = new Promise<void>((resolve) => {
      busy = resolve;
    });
    const sleeping = channel!.execute(SLEEP[language], 60_000, busy);
    await started;
    // The cell is running once the kernel says busy; give the interpreter a moment to enter the sleep.
    await new Promise((r) => setTimeout(r, 500));
    await rest(server, 'POST', `/api/kernels/${kernelId}/interrupt`);
    const reply = await sleeping;
    if (language === 'python3') expect(reply).toMatchObject({ status: 'error', ename: 'KeyboardInterrupt' });
    else expect(['abort', 'error']).toContain(reply.status);
    const after = await channel!.execute(language === 'python3' ? 'print(6 * 7)' : 'cat(6 * 7)');
    expect(after.stdout.trim()).toBe('42');
  });

  it('restarts under the same isolation', async () => {
    const before = kernelPids(kernelId!);
    await rest(server, 'POST', `/api/kernels/${kernelId}/restart`);
    channel!.close();
    channel = await Channel.open(server, kernelId!);
    expect(await waitUntil(() => before.every((pid) => !existsSync(`/proc/${pid}`)), 10_000)).toBe(true);
    const seen = await probe();
    expect(seen).toMatchObject({ secret: 'ERR', link: 'ERR', allowed: 'ALLOWED' });
  });

  it('leaves no process behind once the kernel is shut down', async () => {
    const pids = kernelPids(kernelId!);
    expect(pids.length).toBeGreaterThanOrEqual(2); // bwrap and the interpreter inside it
    channel!.close();
    channel = undefined;
    await rest(server, 'DELETE', `/api/kernels/${kernelId}`);
    kernelId = undefined;
    expect(await waitUntil(() => pids.every((pid) => !existsSync(`/proc/${pid}`)), 15_000)).toBe(true);
    expect(processesMentioning(ws)).toEqual([]);
  });
});

describe('when the gateway dies', () => {
  it('takes its isolated kernels with it (die-with-parent stands in for the parent poller we unset)', async () => {
    const root = join(base, 'dying-server');
    const own = await startTestServer({ root, env: { JUPYTER_PATH: join(root, 'jupyter') } });
    let kernelId: string | undefined;
    try {
      const specDir = join(root, 'jupyter', 'kernels');
      mkdirSync(specDir, { recursive: true });
      const name = await installIsolatedKernelSpec({
        kernelSpecDir: specDir,
        baseSpec: specs.python3!,
        policy,
        workspace: workspaceFor('dying'),
        privateTemp: [paths.systmp],
      });
      kernelId = (await rest(own, 'POST', '/api/kernels', { name })).id as string;
      const channel = await Channel.open(own, kernelId);
      channel.close();
      const pids = kernelPids(kernelId);
      expect(pids.length).toBeGreaterThanOrEqual(2);
      process.kill(own.pid, 'SIGKILL');
      expect(await waitUntil(() => kernelPids(kernelId!).length === 0, 15_000)).toBe(true);
    } finally {
      await own.stop();
      if (kernelId) for (const pid of kernelPids(kernelId)) process.kill(pid, 'SIGKILL');
    }
  });
});

describe('when isolation cannot be enforced', () => {
  it('refuses to install an isolated kernelspec without bubblewrap on PATH, and a kernel without a policy still starts', async () => {
    const ws = workspaceFor('no-bwrap');
    const before = readdirSync(kernelSpecDir);
    const error = await installIsolatedKernelSpec({
      kernelSpecDir,
      baseSpec: specs.python3!,
      policy,
      workspace: ws,
      searchPath: '/nonexistent',
    }).catch((e: unknown) => e);
    expect(IsolationUnavailableError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ code: 'ISOLATION_UNAVAILABLE', reason: 'no-bubblewrap' });
    expect(readdirSync(kernelSpecDir)).toEqual(before);

    const kernel = await rest(server, 'POST', '/api/kernels', { name: 'python3' });
    try {
      const channel = await Channel.open(server, kernel.id);
      const reply = await channel.execute('print(1 + 1)');
      channel.close();
      expect(reply.stdout.trim()).toBe('2');
    } finally {
      await rest(server, 'DELETE', `/api/kernels/${kernel.id}`);
    }
  });

  it('refuses a remote gateway (no kernelspec directory), before any request', async () => {
    const error = await installIsolatedKernelSpec({
      kernelSpecDir: undefined,
      baseSpec: specs.python3!,
      policy,
      workspace: base,
    }).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'IsolationUnavailableError', reason: 'remote-gateway' });
    const remote = await prepareIsolatedKernel({
      gateway: { baseUrl: server.baseUrl, token: server.token },
      policy,
      workspace: base,
      fetch: () => Promise.reject(new Error('must not be called')),
    }).catch((e: unknown) => e);
    expect(remote).toMatchObject({ name: 'IsolationUnavailableError', reason: 'remote-gateway' });
    expect((remote as Error).message).not.toContain(server.token);
  });
});
