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
  }[];
  /** The warm pool: per kernelspec, how many kernels it should keep ready and how many are. */
  pool: Record<string, { wanted: number; ready: number }>;
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
  };
}
