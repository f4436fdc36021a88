import { readFileSync } from 'node:fs';
import { isProcessAlive } from '@kernelwarden/core/os';
import { locateGateway } from './gateway-dir.js';
import { serverClient } from './guarded-transport.js';
import { readServerInfo } from './info-file.js';
import { pooledKernelspecs, readPoolConfig, readyKernels } from './kernel-pool.js';
import { DEFAULT_REQUEST_TIMEOUT_MS, type ResolvedLocalGatewayLocation } from './options.js';
import { listOwners } from './ownership.js';
import { unverifiedServerReason } from './server-verification.js';
import { liveTickets } from './tickets.js';

/** What `LocalGateway.status()` reports, for the CLI. Never the token. */
export interface LocalGatewayStatus {
  /** True when a server is recorded, alive and answering. */
  running: boolean;
  /** The gateway's state directory (`<stateDir>/gateway-<key>`). */
  stateDir: string;
  /** The jupyter-server executable, resolved. */
  command: string;
  /** The interpreter its shebang names (part of the gateway's key). */
  interpreter: string;
  /** The recorded server's address, when one is recorded and verified. */
  baseUrl?: string;
  /** The recorded server's pid. */
  pid?: number;
  /** When the recorded server was started (ISO 8601). */
  startedAt?: string;
  /** Processes holding a ticket. */
  holders: { pid: number; acquiredAt: string }[];
  /**
   * Kernels the server lists, with the process that created (or claimed) each when known; `pooled` for a kernel
   * of the warm pool, ready for a process to claim.
   */
  kernels: {
    id: string;
    name: string;
    executionState?: string;
    ownerPid?: number;
    ownerAlive?: boolean;
    pooled?: boolean;
    /** The Python interpreter the kernel runs, when its command runs one. */
    interpreter?: string;
    /** Its ipykernel's version, when a launcher of that interpreter reported it. */
    ipykernel?: string;
    /** How it started: forked from its interpreter's launcher, or exec'd (`launchReason` says why, when it says). */
    launch?: 'fork' | 'exec';
    /** Why a Python kernel was exec'd rather than forked (forking off, a dead launcher, a differing variable…). */
    launchReason?: string;
  }[];
  /**
   * How the server starts Python kernels (`fork` or `exec`, the `launcher` option it was started with) and its
   * kernel launchers: one per interpreter, with its pid, resident memory and what it preloaded.
   */
  launcher?: {
    mode: 'fork' | 'exec';
    launchers: LauncherStatus[];
  };
  /** The warm pool: per kernelspec, how many kernels it should keep ready and how many are. */
  pool: Record<string, { wanted: number; ready: number }>;
}

/** One kernel launcher of the embedded server. */
export interface LauncherStatus {
  /** The interpreter it runs (and forks kernels of). */
  interpreter: string;
  pid?: number;
  /** `starting`, `ready`, `dead` (replaced at the next start) or `unsafe` (not fork-safe: its kernels are exec'd). */
  state: string;
  /** Its resident memory in bytes (shared with the kernels it forked until they write to it). */
  rssBytes?: number;
  ipykernel?: string;
  /** The modules it preloaded beyond the kernel machinery. */
  preload: string[];
  /** Why it is dead or unsafe; preloads that failed. */
  reason?: string;
  failedPreloads?: string[];
}

interface LaunchersFile {
  mode?: 'fork' | 'exec';
  launchers?: {
    python: string;
    pid?: number | null;
    state: string;
    ipykernel?: string;
    preload?: string[];
    reason?: string;
    failed?: string[];
  }[];
  kernels?: Record<string, { launch?: 'fork' | 'exec'; python?: string; ipykernel?: string; reason?: string }>;
}

function readLaunchers(path: string): LaunchersFile {
  try {
    const parsed = JSON.parse(readFileSync(path, 'utf8')) as unknown;
    return parsed && typeof parsed === 'object' ? (parsed as LaunchersFile) : {};
  } catch {
    return {};
  }
}

/** A process's resident memory in bytes, from `/proc/<pid>/status`. */
function rssOf(pid: number): number | undefined {
  try {
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

function launcherStatus(file: LaunchersFile): LocalGatewayStatus['launcher'] {
  if (file.mode === undefined) return undefined; // a server that writes no launchers.json
  return {
    mode: file.mode === 'exec' ? 'exec' : 'fork',
    launchers: (file.launchers ?? []).map((l) => {
      const rss = typeof l.pid === 'number' && l.state !== 'dead' ? rssOf(l.pid) : undefined;
      return {
        interpreter: l.python,
        ...(typeof l.pid === 'number' ? { pid: l.pid } : {}),
        state: l.state,
        ...(rss === undefined ? {} : { rssBytes: rss }),
        ...(l.ipykernel ? { ipykernel: l.ipykernel } : {}),
        preload: l.preload ?? [],
        ...(l.reason ? { reason: l.reason } : {}),
        ...(l.failed?.length ? { failedPreloads: l.failed } : {}),
      };
    }),
  };
}

function launchOf(file: LaunchersFile, kernelId: string): Partial<LocalGatewayStatus['kernels'][number]> {
  const entry = file.kernels?.[kernelId];
  if (!entry) return {};
  const ipykernel = entry.ipykernel ?? file.launchers?.find((l) => l.python === entry.python && l.ipykernel)?.ipykernel;
  return {
    ...(entry.python ? { interpreter: entry.python } : {}),
    ...(ipykernel ? { ipykernel } : {}),
    ...(entry.launch ? { launch: entry.launch } : {}),
    ...(entry.reason ? { launchReason: entry.reason } : {}),
  };
}

/** The warm pool's counts, from its files. */
function poolCounts(layout: Parameters<typeof readPoolConfig>[0]): LocalGatewayStatus['pool'] {
  const wanted = readPoolConfig(layout);
  const pool: LocalGatewayStatus['pool'] = {};
  for (const name of new Set([...Object.keys(wanted), ...pooledKernelspecs(layout)])) {
    pool[name] = { wanted: wanted[name] ?? 0, ready: readyKernels(layout, name).length };
  }
  return pool;
}

/**
 * Reports whether the embedded server runs, where, who holds tickets and which kernels it has. It takes no lock and
 * changes nothing but the ticket files of dead holders (pruned), and asks the server — through a `GatewayClient` over
 * the guarded transport — only once the record is verified.
 */
export async function gatewayStatus(location: ResolvedLocalGatewayLocation): Promise<LocalGatewayStatus> {
  const { layout, server } = locateGateway(location);
  const base = { stateDir: layout.dir, command: server.command, interpreter: server.interpreter };
  const info = readServerInfo(layout.info);
  const holders = liveTickets(layout.tickets).map((l) => ({ pid: l.pid, acquiredAt: l.acquiredAt }));
  if (!info || unverifiedServerReason(layout, info) !== undefined) {
    return { running: false, ...base, holders, kernels: [], pool: {} };
  }
  let kernels: LocalGatewayStatus['kernels'] = [];
  let running = false;
  const launchers = readLaunchers(layout.launchers);
  try {
    const listed = await serverClient(info, DEFAULT_REQUEST_TIMEOUT_MS).listKernels(
      location.signal ? { signal: location.signal } : {},
    );
    running = true;
    const owners = new Map(listOwners(layout.owners).map((r) => [r.kernelId, r.owner] as const));
    const pooled = new Set(pooledKernelspecs(layout).flatMap((name) => readyKernels(layout, name)));
    kernels = listed.map((k) => {
      const owner = owners.get(k.id);
      return {
        id: k.id,
        name: k.name,
        ...(k.execution_state === undefined ? {} : { executionState: k.execution_state }),
        ...(owner ? { ownerPid: owner.pid, ownerAlive: isProcessAlive(owner) } : {}),
        ...(pooled.has(k.id) ? { pooled: true } : {}),
        ...launchOf(launchers, k.id),
      };
    });
  } catch {
    location.signal?.throwIfAborted();
  }
  return {
    running,
    ...base,
    baseUrl: info.baseUrl,
    pid: info.server.pid,
    startedAt: info.startedAt,
    holders,
    kernels,
    pool: poolCounts(layout),
    ...(launcherStatus(launchers) ? { launcher: launcherStatus(launchers) } : {}),
  };
}
