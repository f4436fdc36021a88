import { mkdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire, Module } from 'node:module';
import { dirname } from 'node:path';
import { Script, constants as vmConstants } from 'node:vm';
import { writeFileAtomic } from '@kernelwarden/core';

/**
 * What became of a script's compile cache on this load: `used` (V8 took it), `missing` (no cache file yet), `stale`
 * (written for another build of the script, another Node.js or another platform), `rejected` (V8 refused it, e.g.
 * other V8 flags) or `off` (no cache file was named).
 */
export type CompileCacheState = 'used' | 'missing' | 'stale' | 'rejected' | 'off';

/** A CommonJS script run with V8's compile cache: its exports, and the means to write the cache for the next run. */
export interface CachedScript<T> {
  readonly exports: T;
  readonly cache: CompileCacheState;
  /** The exit code recorded with the cache that was used (undefined when none was used). */
  readonly cachedExitCode: number | undefined;
  /**
   * Writes the cache of everything compiled so far (the functions this run called included), atomically, recording
   * `exitCode`. Never throws: a cache that cannot be written (a read-only install) only means a slower next start.
   */
  save(exitCode: number): void;
  /**
   * Saves the cache when the next run would do better with a new one: none was used (missing, stale or rejected), or
   * the one used was left by a run that failed (it stopped early, so it compiled less) and this run ended with 0.
   * Returns whether it saved.
   */
  refresh(exitCode: number): boolean;
}

/** Options of `runWithCompileCache()`. */
export interface CompileCacheOptions {
  /** Where the cache lives; undefined runs the script without a cache. */
  cacheFile: string | undefined;
}

const MAGIC = 'kernelwarden-compile-cache 1';

/** The function a CommonJS module's code runs in, as Node's own loader wraps it. */
const WRAPPER = ['(function (exports, require, module, __filename, __dirname) { ', '\n});'] as const;

/**
 * What a cache is valid for: this very file (device, inode, size, modification and change times: any write or
 * replacement of the script changes one of them), this Node.js and this platform. V8 checks its own version and
 * flags too, but of the source only its length, so without this key a rebuilt script of the same length would run
 * the old build's code.
 */
function scriptIdentity(file: string): string {
  const st = statSync(file, { bigint: true });
  return [st.dev, st.ino, st.size, st.mtimeNs, st.ctimeNs, process.version, process.arch, process.platform].join(':');
}

/** The header line and the V8 data of a cache file, or undefined when there is none or it is not one. */
function readCache(cacheFile: string): { identity: string; exitCode: number; data: Buffer } | undefined {
  let bytes: Buffer;
  try {
    bytes = readFileSync(cacheFile);
  } catch {
    return undefined;
  }
  const end = bytes.indexOf(10);
  if (end < 0) return undefined;
  const [magic, identity, exitCode] = bytes.subarray(0, end).toString('utf8').split('\t');
  if (magic !== MAGIC || identity === undefined || exitCode === undefined) return undefined;
  return { identity, exitCode: Number(exitCode), data: bytes.subarray(end + 1) };
}

function writeCache(cacheFile: string, identity: string, exitCode: number, data: Buffer): void {
  mkdirSync(dirname(cacheFile), { recursive: true });
  writeFileAtomic(cacheFile, [`${MAGIC}\t${identity}\t${exitCode}\n`, data], { mode: 0o644 });
}

/**
 * Runs the CommonJS script `file` as `require()` would (its own `module`, `exports`, `require`, `__filename`), but
 * compiled with the V8 code cache in `cacheFile` when that cache was written for this very file by this Node.js.
 *
 * Node.js 22 caches compiled modules itself (`module.enableCompileCache()`); Node.js 20 does not, and a command
 * that runs once and exits spends a good part of its start compiling. A cache written after a run holds the
 * functions that run called, so the next run of the same command compiles almost nothing.
 *
 * Keep the cache where the script is, or anywhere only those who may change the script can write: V8 runs what a
 * cache holds.
 */
export function runWithCompileCache<T>(file: string, opts: CompileCacheOptions): CachedScript<T> {
  const source = readFileSync(file, 'utf8');
  const identity = opts.cacheFile === undefined ? '' : scriptIdentity(file);
  const cached = opts.cacheFile === undefined ? undefined : readCache(opts.cacheFile);
  const usable = cached?.identity === identity ? cached : undefined;
  const script = new Script(`${WRAPPER[0]}${source}${WRAPPER[1]}`, {
    filename: file,
    ...(usable ? { cachedData: usable.data } : {}),
    // The script's own `import()` calls (of packages it did not inline) go to Node's loader, as in a module.
    importModuleDynamically: vmConstants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
  let cache: CompileCacheState;
  if (opts.cacheFile === undefined) cache = 'off';
  else if (!cached) cache = 'missing';
  else if (!usable) cache = 'stale';
  else cache = script.cachedDataRejected === true ? 'rejected' : 'used';

  const mod = new Module(file);
  mod.filename = file;
  const wrapper = script.runInThisContext() as (
    exports: unknown,
    require: NodeJS.Require,
    module: Module,
    filename: string,
    dirname: string,
  ) => void;
  wrapper.call(mod.exports, mod.exports, createRequire(file), mod, file, dirname(file));
  mod.loaded = true;

  const cachedExitCode = cache === 'used' ? usable?.exitCode : undefined;
  const save = (exitCode: number) => {
    if (opts.cacheFile === undefined) return;
    try {
      writeCache(opts.cacheFile, identity, exitCode, script.createCachedData());
    } catch {
      // not writable here: the next run compiles again
    }
  };
  return {
    exports: mod.exports as T,
    cache,
    cachedExitCode,
    save,
    refresh(exitCode) {
      if (cache === 'off') return false;
      const worth = cache !== 'used' || (cachedExitCode !== 0 && exitCode === 0);
      if (worth) save(exitCode);
      return worth;
    },
  };
}
