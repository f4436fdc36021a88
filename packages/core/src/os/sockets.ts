import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** A TCP socket in the LISTEN state, as `/proc/net/tcp` (IPv4) or `/proc/net/tcp6` (IPv6) shows it. */
export interface TcpListener {
  /** `127.0.0.1`, `0.0.0.0`, `::1`, `::`… */
  address: string;
  port: number;
  /** The uid of the socket's owner. */
  uid: number;
  /** The socket's inode, as a process's `socket:[N]` descriptor names it. */
  inode: string;
}

const LISTEN = '0A';

/** One 32-bit word of the table, written by the kernel in this machine's byte order, as its four bytes in order. */
function wordBytes(hex: string): number[] {
  const bytes = [0, 2, 4, 6].map((at) => Number.parseInt(hex.slice(at, at + 2), 16));
  return new Uint8Array(new Uint32Array([0x01020304]).buffer)[0] === 0x04 ? bytes.reverse() : bytes;
}

function ipv6Text(bytes: number[]): string {
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i] ?? 0) << 8) | (bytes[i + 1] ?? 0));
  // The longest run of two or more zero groups becomes `::`.
  let best = { at: -1, length: 1 };
  for (let i = 0; i < 8; i++) {
    if (groups[i] !== 0) continue;
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > best.length) best = { at: i, length: j - i };
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best.at < 0) return hex.join(':');
  return `${hex.slice(0, best.at).join(':')}::${hex.slice(best.at + best.length).join(':')}`;
}

/** The text form of an address field of `/proc/net/tcp` (8 hex digits) or `/proc/net/tcp6` (32), or undefined. */
export function procNetAddress(hex: string): string | undefined {
  if (!/^[0-9A-Fa-f]+$/.test(hex)) return undefined;
  if (hex.length === 8) return wordBytes(hex).join('.');
  if (hex.length !== 32) return undefined;
  const bytes = [0, 8, 16, 24].flatMap((at) => wordBytes(hex.slice(at, at + 8)));
  return ipv6Text(bytes);
}

/** Parses the text of `/proc/net/tcp` or `/proc/net/tcp6` into its listening sockets; other lines are skipped. */
export function parseTcpListeners(text: string): TcpListener[] {
  const listeners: TcpListener[] = [];
  for (const line of text.split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    if (fields.length < 10 || fields[3] !== LISTEN) continue;
    const [addressHex, portHex] = (fields[1] ?? '').split(':');
    const address = procNetAddress(addressHex ?? '');
    if (address === undefined || !portHex || !/^[0-9A-Fa-f]{4}$/.test(portHex)) continue;
    listeners.push({ address, port: Number.parseInt(portHex, 16), uid: Number(fields[7]), inode: fields[9] ?? '' });
  }
  return listeners;
}

/**
 * The machine's listening TCP sockets of one address family (this network namespace's), or undefined where
 * `/proc/net/tcp` (`tcp6`) cannot be read. The table grows with every socket of the machine: read only the family
 * needed.
 */
export function tcpListeners(family: 4 | 6 = 4): TcpListener[] | undefined {
  let text: string;
  try {
    text = readFileSync(family === 4 ? '/proc/net/tcp' : '/proc/net/tcp6', 'utf8');
  } catch {
    return undefined;
  }
  return parseTcpListeners(text);
}

/** The socket inodes process `pid` holds open (its `socket:[N]` descriptors); empty when they cannot be read. */
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
