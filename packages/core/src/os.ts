/**
 * `@kernelwarden/core/os`: what kernelwarden reads about processes from Linux's `/proc` — start times and
 * identities, liveness, descendants, the processes carrying an environment marker (and killing them), command lines,
 * listening TCP sockets. Every function answers "cannot tell" (undefined, `'unsupported'`, an empty list, as each
 * says) where there is no `/proc`; nothing here throws for a process that exits while it is read.
 */
export { KERNEL_MARKER_ENV, kernelMarker } from './os/marker.js';
export type { EnvMarker } from './os/scan.js';
export {
  descendantsOf,
  killProcessesCarrying,
  listProcesses,
  otherProcesses,
  processesCarrying,
  processesMentioning,
} from './os/scan.js';
export type { TcpListener } from './os/sockets.js';
export { parseTcpListeners, procNetAddress, socketInodes, tcpListeners } from './os/sockets.js';
export type { ProcessIdentity, ProcStat } from './os/stat.js';
export {
  bootId,
  currentProcess,
  descriptorDirectory,
  hasExited,
  identityOf,
  isProcessAlive,
  parseProcStat,
  pidNamespace,
  processCmdline,
  processEnviron,
  processEnvironHas,
  processStartTime,
  processStat,
  processUid,
  signalGroup,
} from './os/stat.js';
