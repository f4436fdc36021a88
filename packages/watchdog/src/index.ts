export type { CellTimeoutDetails } from './cell-timeout-error.js';
export {
  CellTimeoutAbandonedError,
  CellTimeoutBootstrapFailedError,
  CellTimeoutError,
  CellTimeoutLeaseReplacedError,
  CellTimeoutRestartFailedError,
} from './cell-timeout-error.js';
export type {
  EscalationReason,
  Unsubscribe,
  WatchdogEvent,
  WatchdogEventType,
  WatchdogListener,
} from './events.js';
export type { ResolvedWatchdogPolicy, WatchdogPolicy } from './policy.js';
export {
  CELL_TIMEOUT_ENV,
  cellTimeoutFromEnv,
  DEFAULT_CELL_TIMEOUT_MS,
  DEFAULT_INTERRUPT_GRACE_MS,
  DEFAULT_KILL_GRACE_MS,
  DEFAULT_KILL_TIMEOUT_MS,
  resolveWatchdogPolicy,
} from './policy.js';
export type { Watchdog } from './watchdog.js';
export { createWatchdog } from './watchdog.js';
