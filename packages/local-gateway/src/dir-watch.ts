import { type FSWatcher, watch } from 'node:fs';

/** Options of `watchDirectory()`. */
export interface DirectoryWatchOptions {
  /** Whether a change to the entry `name` (undefined when the platform does not say) calls back. */
  relevant(name: string | undefined): boolean;
  /** How long after a relevant change the call comes (changes meanwhile make one call); `0`: at the next turn. */
  delayMs: number;
  onChange(): void;
}

/**
 * Calls `onChange` after relevant changes to the entries of directory `dir` (inotify, through `fs.watch`), never
 * keeping the process alive. A directory that is not there, or cannot be watched, calls back never: the caller's own
 * periodic looks still see its changes. Returns the means to stop watching.
 */
export function watchDirectory(dir: string, opts: DirectoryWatchOptions): { close(): void } {
  let scheduled = false;
  const fire = () => {
    scheduled = false;
    opts.onChange();
  };
  const changed = (_event: string, name: string | Buffer | null) => {
    if (scheduled || !opts.relevant(name === null ? undefined : name.toString())) return;
    scheduled = true;
    if (opts.delayMs > 0) setTimeout(fire, opts.delayMs).unref();
    else setImmediate(fire).unref();
  };
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dir, { persistent: false }, changed);
    watcher.on('error', () => watcher?.close());
  } catch {
    // not there, or no inotify: the looks still see the changes
  }
  return { close: () => watcher?.close() };
}
