import { readdirSync, readFileSync, rmSync } from 'node:fs';

/** A kernel or kernel process that outlived the tests that started it. */
export interface Leak {
  kind: 'gateway-kernel' | 'process';
  detail: string;
  pid?: number;
}

/** Processes whose command line mentions `marker` (the test run's root directory), except `exceptPids`. */
export function processesMentioning(
  marker: string,
  exceptPids: readonly number[] = [],
): { pid: number; cmdline: string }[] {
  const found: { pid: number; cmdline: string }[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid || exceptPids.includes(pid)) continue;
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' ').trim();
    } catch {
      continue;
    }
    if (cmdline?.includes(marker)) found.push({ pid, cmdline });
  }
  return found;
}

const KERNEL_PROCESS = /ipykernel_launcher|ipykernel|IRkernel|jupyter-server|jupyter_server|bwrap/;

/**
 * Lists what the tests left behind: kernels the gateway still lists (other than `allowKernelIds`) and kernel,
 * server or sandbox processes whose command line mentions `marker`.
 */
export async function findLeaks(opts: {
  gateway?: { baseUrl: string; token: string };
  marker: string;
  exceptPids?: readonly number[];
  allowKernelIds?: readonly string[];
}): Promise<Leak[]> {
  const leaks: Leak[] = [];
  if (opts.gateway) {
    const res = await fetch(`${opts.gateway.baseUrl}/api/kernels`, {
      headers: { Authorization: `token ${opts.gateway.token}` },
    });
    if (!res.ok) throw new Error(`listing kernels failed: HTTP ${res.status}`);
    const kernels = (await res.json()) as { id: string; name: string }[];
    for (const k of kernels) {
      if (opts.allowKernelIds?.includes(k.id)) continue;
      leaks.push({ kind: 'gateway-kernel', detail: `kernel ${k.id} (${k.name}) is still listed by the gateway` });
    }
  }
  for (const p of processesMentioning(opts.marker, opts.exceptPids)) {
    if (!KERNEL_PROCESS.test(p.cmdline)) continue;
    leaks.push({ kind: 'process', pid: p.pid, detail: `process ${p.pid} is still alive: ${p.cmdline.slice(0, 200)}` });
  }
  return leaks;
}

/** Waits up to `timeoutMs` for `findLeaks` to come back empty; returns what is left. */
export async function waitForNoLeaks(opts: Parameters<typeof findLeaks>[0], timeoutMs = 5000): Promise<Leak[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const leaks = await findLeaks(opts);
    if (leaks.length === 0 || Date.now() > deadline) return leaks;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * The run's teardown: asks the gateway for its kernels, stops it, then asks the OS for processes under `root`.
 * Kills whatever is left, and throws when anything was left, so the run fails.
 */
export async function leakTeardown(
  server: { baseUrl: string; token: string; stop(): Promise<void> },
  root: string,
): Promise<void> {
  const problems: string[] = [];
  const listed = await findLeaks({ gateway: server, marker: '\0never\0' });
  problems.push(...listed.map((l) => l.detail));
  await server.stop();
  const stray = await waitForNoLeaks({ marker: root }, 5000);
  problems.push(...stray.map((l) => l.detail));
  for (const p of processesMentioning(root)) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  if (problems.length === 0 && !process.env.KERNELWARDEN_KEEP_TEST_ROOT) rmSync(root, { recursive: true, force: true });
  if (problems.length > 0) {
    throw new Error(
      `Leak check failed: the tests left ${problems.length} kernel(s) or process(es) behind:\n- ${problems.join('\n- ')}`,
    );
  }
}
