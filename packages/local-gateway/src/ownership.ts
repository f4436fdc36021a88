import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { currentProcess, isProcessAlive, type ProcessIdentity } from '@kernelwarden/core/os';
import type { GatewayClient } from '@kernelwarden/gateway-client';
import { readJsonFile, removeFile, writePrivateFileAtomic } from './state-dir.js';

/** Kernel ids are uuids; anything that could leave the owners directory is refused. */
const KERNEL_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** A kernel and the process that created it. */
export interface OwnerRecord {
  kernelId: string;
  owner: ProcessIdentity;
  createdAt: string;
}

/** Records that this process created kernel `kernelId`. Never throws: a failure only means no cleanup later. */
export function recordOwner(dir: string, kernelId: string): boolean {
  if (!KERNEL_ID.test(kernelId)) return false;
  try {
    writePrivateFileAtomic(
      join(dir, kernelId),
      JSON.stringify({ ...currentProcess(), createdAt: new Date().toISOString() }),
    );
    return true;
  } catch {
    return false;
  }
}

/** Forgets kernel `kernelId` (deleted). Never throws. */
export function forgetOwner(dir: string, kernelId: string): void {
  if (!KERNEL_ID.test(kernelId)) return;
  try {
    removeFile(join(dir, kernelId));
  } catch {
    // nothing to do: a stale record is pruned when its kernel is no longer listed
  }
}

/** Every ownership record. */
export function listOwners(dir: string): OwnerRecord[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const records: OwnerRecord[] = [];
  for (const name of names) {
    if (!KERNEL_ID.test(name) || name.endsWith('.tmp')) continue;
    const value = readJsonFile(join(dir, name)) as
      | { pid?: unknown; startTime?: unknown; createdAt?: unknown }
      | undefined;
    if (!value || typeof value.pid !== 'number') {
      removeFile(join(dir, name));
      continue;
    }
    records.push({
      kernelId: name,
      owner: { pid: value.pid, startTime: typeof value.startTime === 'string' ? value.startTime : undefined },
      createdAt: String(value.createdAt),
    });
  }
  return records;
}

/** Removes every record (the server they refer to is gone, and its kernels with it). */
export function clearOwners(dir: string): void {
  for (const record of listOwners(dir)) forgetOwner(dir, record.kernelId);
}

/** Options of `reapOrphanKernels`. */
export interface ReapOptions {
  /** A client of the gateway's server (through the ticket's guarded transport). */
  client: Pick<GatewayClient, 'baseUrl' | 'listKernels' | 'deleteKernel'>;
  ownersDir: string;
  signal?: AbortSignal | undefined;
  onReaped?: (kernelId: string, owner: ProcessIdentity) => void;
  onFailed?: (kernelId: string, message: string) => void;
}

/**
 * Deletes, through the REST API, every kernel whose creating process is dead, and removes its record; records of
 * dead owners' kernels the server no longer lists are removed too. Returns the ids deleted. Failures are reported, not thrown.
 * While every recorded owner lives, nothing is asked of the server (an acquire then makes no request for it).
 */
export async function reapOrphanKernels(opts: ReapOptions): Promise<string[]> {
  const records = listOwners(opts.ownersDir);
  if (records.every(({ owner }) => isProcessAlive(owner))) return [];
  const request = opts.signal ? { signal: opts.signal } : {};
  let listed: Set<string>;
  try {
    listed = new Set((await opts.client.listKernels(request)).map((k) => k.id));
  } catch (error) {
    opts.signal?.throwIfAborted();
    opts.onFailed?.('*', `could not list kernels at ${opts.client.baseUrl}: ${(error as Error).message}`);
    return [];
  }
  const reaped: string[] = [];
  await Promise.all(
    records.map(async ({ kernelId, owner }) => {
      if (!listed.has(kernelId)) {
        // A live owner's record of a kernel not listed yet is a create in flight (recorded under the id it asked
        // for before sending it): kept, so that the kernel is reaped if its creator dies before the answer.
        if (!isProcessAlive(owner)) forgetOwner(opts.ownersDir, kernelId);
        return;
      }
      if (isProcessAlive(owner)) return;
      try {
        await opts.client.deleteKernel(kernelId, request); // 2xx, 404 and 410 resolve; anything else throws
        forgetOwner(opts.ownersDir, kernelId);
        reaped.push(kernelId);
        opts.onReaped?.(kernelId, owner);
      } catch (error) {
        opts.signal?.throwIfAborted();
        opts.onFailed?.(kernelId, (error as Error).message);
      }
    }),
  );
  return reaped;
}
