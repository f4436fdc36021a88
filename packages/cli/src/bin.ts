#!/usr/bin/env node
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runWithCompileCache } from './compile-cache.js';
import { compileCacheFile } from './compile-cache-location.js';

const dist = dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
// The whole CLI in one file, compiled from the cache the last run of the same command left beside it.
const cli = runWithCompileCache<typeof import('./cli-bundle.js')>(join(dist, 'kernelwarden.cjs'), {
  cacheFile: compileCacheFile(dist, argv, process.env),
});

cli.exports.main(argv).then(
  (code) => {
    process.exitCode = code;
    // What this run compiled is cached for the next run of the command, when that one would do better with it.
    cli.refresh(code);
    // Everything was shut down; if a library still holds a socket or timer open, do not hang the shell on it — but
    // never cut off output a slow reader has not taken yet (a pipe's writes are queued): exit once it is written.
    setTimeout(() => {
      const pending = [process.stdout, process.stderr].filter((stream) => stream.writableLength > 0);
      if (pending.length === 0) process.exit(code);
      void Promise.all(
        pending.map(
          (stream) =>
            new Promise((resolve) => {
              stream.once('drain', resolve);
              stream.once('error', resolve);
              stream.once('close', resolve);
            }),
        ),
      ).then(() => process.exit(code));
    }, 2000).unref();
  },
  (error: unknown) => {
    process.stderr.write(
      `kernelwarden: internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exitCode = 70;
  },
);
