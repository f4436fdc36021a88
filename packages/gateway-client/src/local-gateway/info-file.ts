import { z } from 'zod';
import type { ProcessIdentity } from './process-identity.js';
import { readJsonFile, writePrivateFileAtomic } from './state-dir.js';

const identity = z.object({ pid: z.number().int().positive(), startTime: z.string().optional() });

const serverInfoSchema = z.object({
  version: z.literal(1),
  baseUrl: z.string(),
  port: z.number().int().positive(),
  token: z.string().min(1),
  server: identity,
  watcher: identity.optional(),
  command: z.string(),
  interpreter: z.string(),
  startedAt: z.string(),
  lingerMs: z.number().nonnegative(),
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
}

/** The info file's content, or undefined when it is missing or malformed (treated as "no server"). */
export function readServerInfo(path: string): ServerInfo | undefined {
  const parsed = serverInfoSchema.safeParse(readJsonFile(path));
  return parsed.success ? parsed.data : undefined;
}

/** Writes the info file atomically with mode 0600. */
export function writeServerInfo(path: string, info: ServerInfo): void {
  writePrivateFileAtomic(path, `${JSON.stringify(info, null, 2)}\n`);
}
