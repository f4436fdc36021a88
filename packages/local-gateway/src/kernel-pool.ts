import { existsSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { currentProcess, isProcessAlive, type ProcessIdentity } from '@kernelwarden/core/os';
import { watchDirectory } from './dir-watch.js';
import type { GatewayLayout } from './layout.js';
import { recordOwner } from './ownership.js';
import { ensurePrivateDir, readJsonFile, removeFile, writePrivateFileAtomic } from './state-dir.js';

/**
 * The warm pool's files: one file per ready kernel, `pool/<kernelspec>/<kernel id>`, written by the linger watcher
 * once the kernel answered; `pool/config.json`, the counts the last acquire asked for.
 *
 * A claim is one `rename()` of a ready kernel's file to `pool-claims/<kernel id>~<pid>~<start time>`: of any
 * number of processes claiming at once, exactly one succeeds for each file (the others find it gone and try the
 * next), so a pooled kernel is never handed to two processes. The claimant then records itself as the kernel's
 * owner (`owners/<kernel id>`, as for a kernel it created) and removes its claim file. A claimant that died between
 * the two is found by the watcher: its claim file names a dead process and no live owner, and the kernel is deleted.
 */

/** Kernel ids and kernelspec names that may name a file here (no path separators, no dot files). */
const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** A claim file: `<kernel id>~<pid>~<start time or "">`. */
const CLAIM_NAME = /^([A-Za-z0-9][A-Za-z0-9._-]{0,127})~(\d+)~(\d*)$/;

/** The file of the pool's wanted counts. */
function configPath(layout: GatewayLayout): string {
  return join(layout.pool, 'config.json');
}

/**
 * How long a kernelspec added to the pool with `keepPooled()` stays pooled after the last process asked for it:
 * 30 minutes.
 */
export const KEPT_POOL_MS = 30 * 60_000;
/** The most kernelspecs pooled through `keepPooled()` at once (the ones asked for most recently): 4. */
export const MAX_KEPT_POOLS = 4;

/**
 * Adds kernelspec `kernelName` to the pool with the count of kernelspec `like` (an isolated kernelspec pooled like
 * its base, `python3`): until the spec is removed from the gateway's kernelspec directory, or no process asked for
 * it for `KEPT_POOL_MS`, or `MAX_KEPT_POOLS` others were asked for since. Each call renews it. One file per
 * kernelspec (`pool-kept/<kernelspec>`), so processes adding different ones never overwrite each other's.
 */
export function keepPooled(layout: GatewayLayout, kernelName: string, like: string): void {
  if (!SAFE_NAME.test(kernelName) || !SAFE_NAME.test(like)) return;
  ensurePrivateDir(layout.poolKept);
  writePrivateFileAtomic(join(layout.poolKept, kernelName), JSON.stringify({ like, at: Date.now() }));
}

/** The kernelspecs `keepPooled()` added that still count, each with the kernelspec whose count it takes. */
function keptKernelspecs(layout: GatewayLayout, now: number): { name: string; like: string }[] {
  const kept: { name: string; like: string; at: number }[] = [];
  for (const name of listNames(layout.poolKept)) {
    if (!SAFE_NAME.test(name)) continue;
    const value = readJsonFile(join(layout.poolKept, name)) as { like?: unknown; at?: unknown } | undefined;
    if (!value || typeof value.like !== 'string' || !SAFE_NAME.test(value.like) || typeof value.at !== 'number')
      continue;
    if (now - value.at > KEPT_POOL_MS) continue;
    // Only while the gateway still has the spec: a removed one cannot be started, and its ready kernels go.
    if (!existsSync(join(layout.kernelSpecDir, name, 'kernel.json'))) continue;
    kept.push({ name, like: value.like, at: value.at });
  }
  return kept.sort((a, b) => b.at - a.at).slice(0, MAX_KEPT_POOLS);
}

/** Records the counts the pool should keep (the last acquire's wins); the watcher reads them at each look. */
export function writePoolConfig(layout: GatewayLayout, pool: Readonly<Record<string, number>>): void {
  writePrivateFileAtomic(configPath(layout), JSON.stringify(pool));
}

/**
 * The counts the pool should keep: the last acquire's, and for each kernelspec `keepPooled()` added, the count of
 * the kernelspec it is pooled like. `{}` when none were recorded (no pool).
 */
export function readPoolConfig(layout: GatewayLayout, now = Date.now()): Record<string, number> {
  const value = readJsonFile(configPath(layout));
  const pool: Record<string, number> = {};
  if (!value || typeof value !== 'object') return pool;
  for (const [name, count] of Object.entries(value as Record<string, unknown>)) {
    if (SAFE_NAME.test(name) && Number.isInteger(count) && (count as number) > 0) pool[name] = count as number;
  }
  for (const { name, like } of keptKernelspecs(layout, now)) {
    const count = pool[like];
    if (count !== undefined && pool[name] === undefined) pool[name] = count;
  }
  return pool;
}

function listNames(dir: string): string[] {
  try {
    return readdirSync(dir).filter((name) => !name.startsWith('.') && !name.endsWith('.tmp'));
  } catch {
    return [];
  }
}

/** The kernelspecs the pool has a directory for. */
export function pooledKernelspecs(layout: GatewayLayout): string[] {
  return listNames(layout.pool).filter((name) => SAFE_NAME.test(name) && name !== 'config.json');
}

/** The ready kernels of kernelspec `kernelName`, oldest first. */
export function readyKernels(layout: GatewayLayout, kernelName: string): string[] {
  if (!SAFE_NAME.test(kernelName)) return [];
  const dir = join(layout.pool, kernelName);
  const entries = listNames(dir)
    .filter((id) => SAFE_NAME.test(id))
    .map((id) => {
      try {
        return { id, at: statSync(join(dir, id)).mtimeMs };
      } catch {
        return undefined;
      }
    })
    .filter((e) => e !== undefined);
  return entries.sort((a, b) => a.at - b.at).map((e) => e.id);
}

/** Puts a ready kernel of `kernelName` into the pool (the watcher, once the kernel answered). */
export function addReadyKernel(layout: GatewayLayout, kernelName: string, kernelId: string): void {
  if (!SAFE_NAME.test(kernelName) || !SAFE_NAME.test(kernelId)) return;
  const dir = join(layout.pool, kernelName);
  ensurePrivateDir(dir);
  writePrivateFileAtomic(join(dir, kernelId), JSON.stringify({ kernelId, kernelName, readyAt: Date.now() }));
}

/** Takes a ready kernel's file out of the pool for `claimant`; false when another process took it first. */
function takeReady(
  layout: GatewayLayout,
  kernelName: string,
  kernelId: string,
  claimant: ProcessIdentity,
): string | undefined {
  const claim = join(layout.poolClaims, `${kernelId}~${claimant.pid}~${claimant.startTime ?? ''}`);
  try {
    renameSync(join(layout.pool, kernelName, kernelId), claim);
    return claim;
  } catch {
    return undefined;
  }
}

/**
 * Claims a ready kernel of `kernelName` for this process: takes its file (one `rename()`, which only one claimant
 * can win), records this process as its owner, and returns its id; undefined when the pool has none ready.
 */
export function claimPooledKernel(layout: GatewayLayout, kernelName: string): string | undefined {
  const me = currentProcess();
  for (const kernelId of readyKernels(layout, kernelName)) {
    const claim = takeReady(layout, kernelName, kernelId, me);
    if (claim === undefined) continue;
    recordOwner(layout.owners, kernelId);
    removeFile(claim);
    return kernelId;
  }
  return undefined;
}

/**
 * Takes every ready kernel of `kernelName` beyond the first `keep` out of the pool for the caller (the watcher,
 * to delete them when the pool was made smaller); returns their ids.
 */
export function takeSurplus(layout: GatewayLayout, kernelName: string, keep: number): string[] {
  const me = currentProcess();
  const taken: string[] = [];
  for (const kernelId of readyKernels(layout, kernelName).slice(keep)) {
    const claim = takeReady(layout, kernelName, kernelId, me);
    if (claim === undefined) continue;
    removeFile(claim);
    taken.push(kernelId);
  }
  return taken;
}

/**
 * Claims whose claimant died before recording itself as the kernel's owner: their kernels belong to nobody. The
 * claim files are removed; the ids returned are the kernels to delete. A claim whose kernel has an owner record
 * now is only removed (the orphan sweep of `acquire()` handles that kernel like any other).
 */
export function abandonedClaims(layout: GatewayLayout): string[] {
  const orphans: string[] = [];
  for (const name of listNames(layout.poolClaims)) {
    const match = CLAIM_NAME.exec(name);
    if (!match) {
      removeFile(join(layout.poolClaims, name));
      continue;
    }
    const [, kernelId, pid, startTime] = match as unknown as [string, string, string, string];
    if (isProcessAlive({ pid: Number(pid), startTime: startTime || undefined })) continue;
    removeFile(join(layout.poolClaims, name));
    if (readJsonFile(join(layout.owners, kernelId)) === undefined) orphans.push(kernelId);
  }
  return orphans;
}

/**
 * Calls `onClaim` as soon as a pooled kernel is claimed (its file is renamed into `pool-claims/`, whose directory is
 * `dir`): the linger watcher starts the kernel's replacement then, while the command that claimed it runs its cell,
 * so that the next command finds a started kernel. Claims made together make one call. A directory that cannot be
 * watched is left to the watcher's looks. Returns the means to stop watching.
 */
export function watchPoolClaims(dir: string, onClaim: () => void): { close(): void } {
  return watchDirectory(dir, {
    // A claim file appears (the rename) and goes (the claimant recorded itself as owner): one look is enough.
    relevant: (name) => name === undefined || CLAIM_NAME.test(name),
    delayMs: 0,
    onChange: onClaim,
  });
}

/** Forgets every pool entry and claim (the server they refer to is gone, and its kernels with it). */
export function clearPool(layout: GatewayLayout): void {
  for (const name of pooledKernelspecs(layout)) rmSync(join(layout.pool, name), { recursive: true, force: true });
  for (const name of listNames(layout.poolClaims)) removeFile(join(layout.poolClaims, name));
  for (const name of listNames(layout.poolKept)) removeFile(join(layout.poolKept, name));
}
