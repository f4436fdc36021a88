import { socketInodes, tcpListeners } from '@kernelwarden/core/os';

/** What `listenerOwnership()` found on a port. */
export type ListenerOwnership = 'ours' | 'none' | 'foreign' | 'unknown';

/** The listening sockets last found held by a verified server: `<port>:<pid>` → their inodes. */
const verified = new Map<string, ReadonlySet<string>>();

/**
 * Who listens on `127.0.0.1:port`: `'ours'` when the listening socket is held by process `pid` and belongs to this
 * user, `'foreign'` when something else listens there, `'none'` when nothing does (yet), `'unknown'` where there is
 * no table of listening sockets to read (not Linux). Read from the process table, without connecting: nothing, least
 * of all a token, is sent to a listener before it is known to be the server we started.
 *
 * Once a server's listeners were found ours, a later call only checks that `pid` still holds those very sockets (its
 * descriptors, about 0.1 ms, against 1.3 ms or more for the machine's table of TCP sockets, which grows with every
 * socket of the machine): while the server holds its listening socket open, no other user's process can bind the
 * port, and a server that closed it (stopping) no longer holds it, so the full check runs again. `known` carries such
 * sockets from an earlier process (`verifiedListenerInodes()` when the server was found listening, kept in a private
 * file).
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
  const table = tcpListeners(4);
  if (!table) return 'unknown';
  const listeners = table.filter((l) => l.address === '127.0.0.1' && l.port === port);
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
