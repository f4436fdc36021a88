import { lazy } from '@kernelwarden/core';
import type { ProcessIdentity } from '@kernelwarden/core/os';
import { readJsonFile, unsafeFileReason, writePrivateFileAtomic } from './state-dir.js';
import { zod } from './zod.js';

/** The schema of `server.json`, built on the first read (importing this module does not load zod). */
const serverInfoSchema = lazy(() => {
  const { z } = zod();
  const identity = z.object({ pid: z.number().int().positive(), startTime: z.string().optional() });

  return z.object({
    version: z.literal(1),
    baseUrl: z.string(),
    port: z.number().int().positive(),
    token: z.string().min(1),
    server: identity,
    watcher: identity.optional(),
    command: z.string(),
    interpreter: z.string(),
    startedAt: z.string(),
    lingerMs: z.number().finite().nonnegative(),
    instance: z
      .string()
      .regex(/^[0-9a-f]{8,64}$/)
      .optional(),
    ipcDir: z.string().startsWith('/').optional(),
    listeners: z.array(z.string().regex(/^\d+$/)).optional(),
  });
});

/** What `server.json` records about the running server (the only state file holding the token; mode 0600). */
export interface ServerInfo {
  version: 1;
  baseUrl: string;
  port: number;
  token: string;
  server: ProcessIdentity;
  watcher?: ProcessIdentity | undefined;
  command: string;
  interpreter: string;
  startedAt: string;
  /** The linger used when the last holder vanished without releasing. */
  lingerMs: number;
  /** Random id of this server run: its kernels' processes carry it (`KERNELWARDEN_KERNEL=<instance>:<id>`). */
  instance?: string | undefined;
  /** The private directory of the kernels' ZMQ ipc sockets. */
  ipcDir?: string | undefined;
  /**
   * The server's listening sockets on its port (inodes), as found when it started: a later process checks that the
   * server still holds them instead of reading the machine's listening sockets again (see `listenerOwnership`).
   */
  listeners?: string[] | undefined;
}

/**
 * The info file's content, or undefined when it is missing, malformed, or not a private file of this user's
 * (treated as "no server": a planted or loosened `server.json` is never trusted, and never signals a process).
 */
export function readServerInfo(path: string): ServerInfo | undefined {
  if (unsafeFileReason(path) !== undefined) return undefined;
  const parsed = serverInfoSchema().safeParse(readJsonFile(path));
  return parsed.success ? parsed.data : undefined;
}

/** Writes the info file atomically with mode 0600. */
export function writeServerInfo(path: string, info: ServerInfo): void {
  writePrivateFileAtomic(path, `${JSON.stringify(info, null, 2)}\n`);
}
