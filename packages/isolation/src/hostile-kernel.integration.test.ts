import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GatewayKernel, KernelDiedError, KernelStartError } from '@kernelwarden/gateway-client';
import { LocalGateway, type LocalGatewayTicket } from '@kernelwarden/local-gateway';
import { kernelPids, processesMentioning, testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BaseKernelSpec, installIsolatedKernelSpec } from './kernelspec.js';
import { createReadIsolationPolicy } from './policy.js';

// Kernels that try to get out, as cells of real ipykernel and IRkernel kernels on a real jupyter-server (the
// embedded LocalGateway), as the user the suite runs as (root here). The same attacks by a second, non-root uid are
// in sandbox-privileges.integration.test.ts.

let base: string;
let systmp: string;
let ticket: LocalGatewayTicket;
let specs: Record<string, BaseKernelSpec>;

beforeAll(async () => {
  base = mkdtempSync(join(testGateway().root, 'hostile-'));
  systmp = join(base, 'systmp');
  mkdirSync(systmp);
  writeFileSync(join(systmp, 'host-file.txt'), 'HOST TEMP\n');
  ticket = await LocalGateway.acquire({ stateDir: join(base, 'state'), lingerMs: 0 });
  const res = await fetch(`${ticket.baseUrl}/api/kernelspecs`, { headers: { Authorization: `token ${ticket.token}` } });
  const listing = (await res.json()) as { kernelspecs: Record<string, { spec: Omit<BaseKernelSpec, 'name'> }> };
  specs = {};
  for (const [name, entry] of Object.entries(listing.kernelspecs)) specs[name] = { name, ...entry.spec };
}, 120_000);

afterAll(async () => {
  await ticket?.release();
});

type Language = 'python3' | 'ir';

/**
 * A workspace with a hidden root two levels inside it (`ws/sub/secret`, the layout a kernel could move before)
 * and a hidden vault outside it, each holding a secret.
 */
function stage(name: string) {
  const ws = join(base, `ws-${name}`);
  const inner = join(ws, 'sub', 'secret');
  const vault = join(base, `vault-${name}`);
  mkdirSync(inner, { recursive: true });
  mkdirSync(vault);
  writeFileSync(join(inner, 'secret.txt'), 'TOP-SECRET-INNER\n');
  writeFileSync(join(vault, 'secret.txt'), 'TOP-SECRET-VAULT\n');
  const policy = createReadIsolationPolicy({
    roots: [
      { path: vault, label: 'vault' },
      { path: inner, label: 'inner secret' },
    ],
    tempDir: systmp,
  });
  return { ws, inner, vault, policy, moved: join(ws, 'moved', 'secret') };
}

async function isolatedSpec(language: Language, layout: ReturnType<typeof stage>): Promise<string> {
  return installIsolatedKernelSpec({
    kernelSpecDir: ticket.kernelSpecDir,
    baseSpec: specs[language]!,
    policy: layout.policy,
    workspace: layout.ws,
    privateTemp: [systmp],
    hide: [ticket.stateDir],
  });
}

function start(kernelName: string): Promise<GatewayKernel> {
  return GatewayKernel.start({ gateway: ticket, kernelName, startupTimeoutMs: 60_000 });
}

/** Runs `script` through /bin/sh from inside the kernel and returns its stdout. */
function shellCell(language: Language, script: string): string {
  return language === 'python3'
    ? `import subprocess\nprint(subprocess.run(['/bin/sh', '-c', ${JSON.stringify(script)}], capture_output=True, text=True).stdout, end='')`
    : `cat(system2('/bin/sh', c('-c', shQuote(${JSON.stringify(script)})), stdout = TRUE), sep = '\\n')`;
}

async function run(kernel: GatewayKernel, code: string): Promise<string> {
  const result = await kernel.execute(code, { timeoutMs: 60_000 });
  expect(result.status, `${result.stderr}${result.error?.evalue ?? ''}`).toBe('ok');
  return result.stdout;
}

/** Reads both secrets (at their paths and where a kernel may have moved one) and lists the fake system temp. */
function readSecrets(layout: ReturnType<typeof stage>): string {
  const files = [layout.vault, layout.inner, layout.moved].map((d) => join(d, 'secret.txt')).join(' ');
  return `cat ${files} 2>/dev/null; ls ${systmp}; echo end`;
}

async function waitUntil(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 200));
  }
  return true;
}

describe.each(['python3', 'ir'] as const)('a hostile isolated %s kernel', (language) => {
  it('holds no capability and cannot unmount what hides a directory or its private temp', async () => {
    const layout = stage(`caps-${language}`);
    const kernel = await start(await isolatedSpec(language, layout));
    try {
      const caps = await run(kernel, shellCell(language, "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status"));
      expect(caps.trim().split('\n')).toEqual(
        ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb'].map((k) => `${k}:\t0000000000000000`),
      );
      const undo = [layout.vault, layout.inner, systmp]
        .map((t) => `umount ${t} 2>/dev/null; umount -l ${t} 2>/dev/null`)
        .join('; ');
      // Also from a user namespace of its own, where it holds every capability over a copy of the mounts.
      const nested = `unshare --user --mount --keep-caps /bin/sh -c '${undo}; cat ${join(layout.inner, 'secret.txt')}' 2>/dev/null`;
      const seen = await run(kernel, shellCell(language, `${undo}; ${nested}; ${readSecrets(layout)}`));
      expect(seen).not.toContain('TOP-SECRET');
      expect(seen).not.toContain('host-file.txt');
      expect(seen.trim().split('\n').at(-1)).toBe('end');
    } finally {
      await kernel.shutdown();
    }
  });

  it('cannot move a hidden root out of its workspace: the rename is refused, and after a restart it is still hidden', async () => {
    const layout = stage(`move-${language}`);
    const kernel = await start(await isolatedSpec(language, layout));
    try {
      // Rename the hidden root's parent (or the root itself) and leave an empty decoy at the old path.
      const attempt =
        language === 'python3'
          ? [
              'import os',
              'for a, b in (("sub", "moved"), ("sub/secret", "sub/other")):',
              '    try:',
              '        os.rename(a, b)',
              '        os.makedirs(a, exist_ok=True)',
              '        print("moved", a)',
              '    except OSError as e:',
              '        print("refused", a, e.errno)',
            ].join('\n')
          : [
              'for (p in list(c("sub", "moved"), c("sub/secret", "sub/other"))) {',
              '  ok <- suppressWarnings(file.rename(p[1], p[2]))',
              '  if (ok) { dir.create(p[1], recursive = TRUE); cat("moved", p[1], "\\n") } else cat("refused", p[1], "\\n")',
              '}',
            ].join('\n');
      const tried = await run(kernel, attempt);
      expect(tried).not.toContain('moved');
      expect(tried.match(/refused/g)).toHaveLength(2);
      if (language === 'python3') expect(tried).toContain('refused sub 16'); // EBUSY

      // The next launch of the same kernel: the server's own restart after the interpreter died, or a restart.
      if (language === 'python3') {
        const died = await kernel.execute('import os\nos._exit(1)').catch((e: unknown) => e);
        expect(KernelDiedError.isInstance(died)).toBe(true);
      } else {
        await kernel.restart();
      }
      const seen = await run(kernel, shellCell(language, readSecrets(layout)));
      expect(seen).not.toContain('TOP-SECRET');
      expect(readdirSync(layout.ws)).toEqual(['sub']);
      expect(readdirSync(join(layout.ws, 'sub'))).toEqual(['secret']);
    } finally {
      await kernel.shutdown();
    }
  });

  it('refuses to launch once a hidden root was moved away and a decoy left in its place, and says why', async () => {
    const layout = stage(`decoy-${language}`);
    const name = await isolatedSpec(language, layout);
    const first = await start(name);
    try {
      expect(await run(first, shellCell(language, readSecrets(layout)))).not.toContain('TOP-SECRET');
      // Done from outside any sandbox (another process of the user, an unisolated kernel): the kernelspec must
      // not hide the decoy and expose the secret at its new path.
      renameSync(join(layout.ws, 'sub'), join(layout.ws, 'moved'));
      mkdirSync(layout.inner, { recursive: true });

      const t0 = Date.now();
      const refused = await start(name).catch((e: unknown) => e);
      expect(Date.now() - t0).toBeLessThan(30_000);
      expect(KernelStartError.isInstance(refused)).toBe(true);
      expect((refused as Error).message).toContain(
        `kernelwarden: the isolated kernel was not started: ${join(layout.ws, 'sub')} is no longer the same ` +
          'directory (moved, replaced or a symbolic link) since its read-isolation policy was checked',
      );

      if (language === 'python3') {
        // The server's automatic restart of the running kernel is refused the same way: the kernel stays down.
        // The launcher's line is in the kernel's own log (kernels never write into the server's).
        const log = join(ticket.stateDir, 'kernel-logs', `${first.id}.log`);
        await first.execute('import os\nos._exit(1)').catch(() => {});
        expect(
          await waitUntil(async () => {
            const res = await fetch(`${ticket.baseUrl}/api/kernels/${first.id}`, {
              headers: { Authorization: `token ${ticket.token}` },
            });
            if (res.status === 404) return true;
            return ((await res.json()) as { execution_state?: string }).execution_state === 'dead';
          }, 90_000),
        ).toBe(true);
        expect(kernelPids(first.id)).toEqual([]);
        expect(readFileSync(log, 'utf8')).toContain(`${join(layout.ws, 'sub')} is no longer the same directory`);
      }
    } finally {
      await first.shutdown();
    }
  });

  it('takes every process it started, new sessions and daemons included, down with it', async () => {
    const layout = stage(`orphans-${language}`);
    const name = await isolatedSpec(language, layout);
    const spawnOrphans = (marker: string) =>
      shellCell(
        language,
        // One in a new session, one double-forked daemon: neither is in the kernel's process group.
        `setsid /bin/sh -c 'sleep 1000; :' ${marker}-session </dev/null >/dev/null 2>&1 & ` +
          `(setsid /bin/sh -c 'sleep 1000; :' ${marker}-daemon </dev/null >/dev/null 2>&1 &); echo started`,
      );
    const kernel = await start(name);
    try {
      const ways =
        language === 'python3'
          ? (['interpreter killed with its process group', 'interpreter exits', 'shutdown'] as const)
          : (['shutdown'] as const);
      for (const way of ways) {
        const marker = `kw-orphan-${randomBytes(4).toString('hex')}`;
        expect(await run(kernel, spawnOrphans(marker))).toContain('started');
        expect(await waitUntil(() => processesMentioning(marker).length === 2, 10_000)).toBe(true);
        if (way === 'shutdown') {
          expect(await kernel.shutdown()).toEqual({ confirmed: true });
        } else if (way === 'interpreter exits') {
          await kernel.execute('import os\nos._exit(0)').catch(() => {});
        } else {
          // What jupyter-server does to a kernel it kills: SIGKILL to the kernel's process group.
          const pgid = Number(
            readFileSync(`/proc/${kernelPids(kernel.id)[0]}/stat`, 'utf8')
              .split(') ')[1]!
              .split(' ')[2],
          );
          process.kill(-pgid, 'SIGKILL');
        }
        expect(await waitUntil(() => processesMentioning(marker).length === 0, 20_000), way).toBe(true);
        if (way !== 'shutdown') {
          // The server restarted it; the next cell runs on the new interpreter.
          expect(
            await waitUntil(
              async () => (await kernel.execute('1', { timeoutMs: 30_000 }).catch(() => undefined))?.status === 'ok',
              60_000,
            ),
          ).toBe(true);
        }
      }
    } finally {
      await kernel.shutdown();
    }
  });
});

describe('a hostile isolated kernel next to other kernels of the same gateway', () => {
  it("sees no other kernel's sockets and cannot read another kernel's iopub, even with /tmp shared", async () => {
    const layout = stage('neighbours');
    const name = await isolatedSpec('python3', layout);
    const neighbour = await start('python3');
    const isolated = await start(name);
    try {
      const connection = JSON.parse(
        readFileSync(join(ticket.stateDir, 'runtime', `kernel-${neighbour.id}.json`), 'utf8'),
      ) as { transport: string; ip: string; iopub_port: number };
      expect(connection.transport).toBe('ipc');
      const iopub = `${connection.ip}-${connection.iopub_port}`;
      const base = join(connection.ip, '..', '..');
      const listen = [
        'import json, os, time, zmq',
        `base, path = ${JSON.stringify(base)}, ${JSON.stringify(iopub)}`,
        'seen = sorted(os.listdir(base)) if os.path.isdir(base) else None',
        'sub = zmq.Context.instance().socket(zmq.SUB)',
        "sub.setsockopt(zmq.SUBSCRIBE, b'')",
        'sub.setsockopt(zmq.LINGER, 0)',
        "sub.connect('ipc://' + path)",
        'count, end = 0, time.time() + 3',
        'while time.time() < end:',
        '    if sub.poll(100):',
        '        sub.recv_multipart()',
        '        count += 1',
        "print(json.dumps({'listing': seen, 'socket': os.path.exists(path), 'messages': count}))",
      ].join('\n');
      const report = isolated.execute(listen, { timeoutMs: 60_000 });
      await new Promise((r) => setTimeout(r, 800));
      for (let i = 0; i < 5; i++) await run(neighbour, "print('neighbour-output')");
      const result = await report;
      expect(result.status, result.stderr).toBe('ok');
      const seen = JSON.parse(result.stdout) as { listing: string[] | null; socket: boolean; messages: number };
      expect(seen.messages).toBe(0);
      expect(seen.socket).toBe(false);
      expect(seen.listing ?? []).toEqual([isolated.id]);
    } finally {
      await isolated.shutdown();
      await neighbour.shutdown();
    }
  });
});

describe("a hostile isolated kernel and the gateway's log", () => {
  it("holds no descriptor of the server's log: what it writes goes to its own kernel log", async () => {
    const layout = stage('log');
    const name = await isolatedSpec('python3', layout);
    const kernel = await start(name);
    try {
      const marker = `kw-forged-${randomBytes(3).toString('hex')}`;
      await run(kernel, `import os\nos.write(2, b"[I 2026-01-01 00:00:00.000 ServerApp] ${marker}\\n")`);
      const serverLog = join(ticket.stateDir, 'server.log');
      const kernelLog = join(ticket.stateDir, 'kernel-logs', `${kernel.id}.log`);
      const held = kernelPids(kernel.id).flatMap((pid) => {
        try {
          return readdirSync(`/proc/${pid}/fd`).map((fd) => {
            try {
              return readlinkSync(`/proc/${pid}/fd/${fd}`);
            } catch {
              return '';
            }
          });
        } catch {
          return [];
        }
      });
      expect(held.length).toBeGreaterThan(0);
      expect(held).not.toContain(serverLog);
      expect(await waitUntil(() => readFileSync(kernelLog, 'utf8').includes(marker), 10_000)).toBe(true);
      expect(readFileSync(serverLog, 'utf8')).not.toContain(marker);
    } finally {
      await kernel.shutdown();
    }
  });
});
