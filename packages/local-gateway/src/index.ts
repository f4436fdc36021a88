export type { LocalGatewayErrorCode } from './errors.js';
export { LocalGatewayError } from './errors.js';
export type { LocalGatewayEvent } from './events.js';
export { KEPT_POOL_MS, MAX_KEPT_POOLS } from './kernel-pool.js';
export { LocalGateway } from './local-gateway.js';
export type {
  LauncherMode,
  LocalGatewayLocation,
  LocalGatewayOptions,
  LocalGatewayStopOptions,
  ResolvedLocalGatewayLocation,
  ResolvedLocalGatewayOptions,
  ResolvedLocalGatewayStopOptions,
} from './options.js';
export {
  DEFAULT_JOURNAL_MAX_AGE_MS,
  DEFAULT_JOURNAL_MAX_BYTES,
  DEFAULT_LAUNCHER,
  DEFAULT_LINGER_MS,
  DEFAULT_POOL,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_ROOT_DIR,
  DEFAULT_SERVER_COMMAND,
  DEFAULT_STARTUP_TIMEOUT_MS,
  DEFAULT_STOP_TIMEOUT_MS,
  JUPYTER_SERVER_ENV,
  LAUNCHER_ENV,
  LAUNCHER_PRELOAD_ENV,
  POOL_ENV,
  resolveLocalGatewayOptions,
  STATE_DIR_ENV,
} from './options.js';
export { LOCAL_GATEWAY_SERVER_CONFIG } from './server-config.js';
export { SERVER_ENV_ALLOWED } from './server-env.js';
export type { StartCapacitySettings } from './start-capacity.js';
export {
  DEFAULT_START_QUEUE_TIMEOUT_MS,
  defaultMaxConcurrentStarts,
  defaultMaxKernels,
  KERNEL_MEMORY_BUDGET_BYTES,
} from './start-capacity.js';
export type { LauncherStatus, LocalGatewayStatus } from './status.js';
export type { LocalGatewayPool, LocalGatewayTicket } from './ticket.js';
