import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** A TCP socket in the LISTEN state on 127.0.0.1, as `/proc/net/tcp` shows it. */
export interface LoopbackListener {
  port: number;
  uid: number;
  inode: string;
}

const LISTEN = '0A';
const LOOPBACK_HEX = '0100007F';

/** Parses `/proc/net/tcp` text into its 127.0.0.1 listeners. */
export function parseLoopbackListeners(text: string): LoopbackListener[] {
  const listeners: LoopbackListener[] = [];
  for (const line of text.split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    if (fields.length < 10) continue;
    const [address, portHex] = (fields[1] ?? '').split(':');
    if (address !== LOOPBACK_HEX || fields[3] !== LISTEN || !portHex) continue;
    listeners.push({ port: Number.parseInt(portHex, 16), uid: Number(fields[7]), inode: fields[9] ?? '' });
  }
  return listeners;
}

/** The socket inodes process `pid` holds open (`socket:[N]` descriptors); empty when it cannot be read. */
export function socketInodes(pid: number): Set<string> {
  const inodes = new Set<string>();
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return inodes;
  }
  for (const fd of fds) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match?.[1]) inodes.add(match[1]);
    } catch {
      // closed meanwhile
    }
  }
  return inodes;
}

/** What `listenerOwnership()` found on a port. */
export type ListenerOwnership = 'ours' | 'none' | 'foreign' | 'unknown';

/** The listening sockets last found held by a verified server: `<port>:<pid>` → their inodes. */
const verified = new Map<string, ReadonlySet<string>>();

/**
 * Who listens on `127.0.0.1:port`: `'ours'` when the listening socket is held by process `pid` and belongs to this
 * user, `'foreign'` when something else listens there, `'none'` when nothing does (yet), `'unknown'` where there is
 * no `/proc/net/tcp` (not Linux). Read from `/proc`, without connecting: nothing, least of all a token, is sent to a
 * listener before it is known to be the server we started.
 *
 * Once a server's listeners were found ours, a later call only checks that `pid` still holds those very sockets (its
 * descriptors, about 0.1 ms, against 1.3 ms or more for `/proc/net/tcp`, which grows with every socket of the
 * machine): while the server holds its listening socket open, no other user's process can bind the port, and a
 * server that closed it (stopping) no longer holds it, so the full check runs again. `known` carries such sockets
 * from an earlier process (`loopbackListenerInodes()` when the server was found listening, kept in a private file).
 */
export function listenerOwnership(
  port: number,
  pid: number,
  uid = process.getuid?.() ?? -1,
  known?: readonly string[],
): ListenerOwnership {
  const key = `${port}:${pid}:${uid}`;
  const remembered = verified.get(key) ?? (known && known.length > 0 ? new Set(known) : undefined);
  if (remembered) {
    const held = socketInodes(pid);
    if ([...remembered].every((inode) => held.has(inode))) {
      verified.set(key, remembered);
      return 'ours';
    }
    verified.delete(key);
  }
  let text: string;
  try {
    text = readFileSync('/proc/net/tcp', 'utf8');
  } catch {
    return 'unknown';
  }
  const listeners = parseLoopbackListeners(text).filter((l) => l.port === port);
  if (listeners.length === 0) return 'none';
  const held = socketInodes(pid);
  const ours = listeners.every((l) => l.uid === uid && held.has(l.inode));
  if (ours) verified.set(key, new Set(listeners.map((l) => l.inode)));
  return ours ? 'ours' : 'foreign';
}

/**
 * The sockets `listenerOwnership()` last found `pid` listening with on `127.0.0.1:port` (its inodes), for a later
 * process to check with; empty when it found none (or was not asked).
 */
export function verifiedListenerInodes(port: number, pid: number, uid = process.getuid?.() ?? -1): string[] {
  return [...(verified.get(`${port}:${pid}:${uid}`) ?? [])];
}
