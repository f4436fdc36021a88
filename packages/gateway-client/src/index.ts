export type { ChannelName, JupyterMessage, MessageHeader } from '@kernelwarden/jupyter-protocol';
export { createMessage, encodeLegacy, encodeV1, V1_SUBPROTOCOL } from '@kernelwarden/jupyter-protocol';
export type { OutputCaps } from './cell-output.js';
export { DEFAULT_OUTPUT_CAPS } from './cell-output.js';
export type { ReconnectPolicy, WireProtocol } from './channel.js';
export type { CollectCellOptions, CollectedCell } from './collect-cell.js';
export { collectCell, KernelJournalUnavailableError } from './collect-cell.js';
export { DefaultWebSocket } from './default-websocket.js';
export type { KernelDeathReason } from './errors.js';
export {
  GatewayAuthError,
  GatewayBusyError,
  GatewayCapacityError,
  GatewayDownError,
  GatewayRequestError,
  GatewayResponseTooLargeError,
  GatewayUnavailableError,
  InvalidKernelIdError,
  KernelDiedError,
  KernelEnvError,
  KernelStartError,
  ProtocolError,
} from './errors.js';
export { MISSING_REPLY_ENAME } from './execution.js';
export type {
  GatewayRouter,
  GatewaySetLike,
  KernelModel,
  KernelSpecModel,
  KernelSpecsModel,
  RequestOptions,
} from './gateway-client.js';
export { GatewayClient } from './gateway-client.js';
export type {
  GatewayAnswer,
  GatewayClientOptions,
  GatewayFlavor,
  GatewayRequest,
  KernelDiagnostics,
  KernelOwnership,
  KernelPool,
  KernelProcesses,
  ResolvedGatewayClientOptions,
  StartQueue,
  WebSocketClass,
} from './gateway-client-options.js';
export {
  DEFAULT_GATEWAY_FLAVOR,
  DEFAULT_MAX_RESPONSE_BYTES,
  DEFAULT_REQUEST_TIMEOUT_MS,
  resolveGatewayClientOptions,
} from './gateway-client-options.js';
export { GatewayKernel } from './gateway-kernel.js';
export type {
  EnvironmentStep,
  GatewayKernelConnectOptions,
  GatewayKernelStartOptions,
  ResolvedGatewayKernelOptions,
} from './gateway-kernel-options.js';
export {
  DEFAULT_ABANDONED_CREATE_WAIT_MS,
  DEFAULT_CLEANUP_RETRY,
  DEFAULT_CLEANUP_TIMEOUT_MS,
  DEFAULT_CREATE_ATTEMPTS,
  DEFAULT_CREATE_RETRY_DELAY_MS,
  DEFAULT_ENVIRONMENT_STEP,
  DEFAULT_HEARTBEAT_MS,
  DEFAULT_IDLE_GRACE_MS,
  DEFAULT_INTERRUPT_DRAIN_MS,
  DEFAULT_IOPUB_NUDGE_MS,
  DEFAULT_IOPUB_NUDGES,
  DEFAULT_KERNEL_INFO_RETRY_MS,
  DEFAULT_KERNEL_NAME,
  DEFAULT_LIVENESS_POLL_MS,
  DEFAULT_LIVENESS_TIMEOUT_MS,
  DEFAULT_MAX_FRAME_BYTES,
  DEFAULT_PROTOCOL,
  DEFAULT_RECONNECT,
  DEFAULT_RECOVERY,
  DEFAULT_REMOTE_STARTUP_TIMEOUT_MS,
  DEFAULT_REPLY_GRACE_MS,
  DEFAULT_RESTART_TIMEOUT_MS,
  DEFAULT_RESUME_FROM_JOURNAL,
  DEFAULT_SHUTDOWN_TIMEOUT_MS,
  DEFAULT_STALL_WORKAROUND,
  DEFAULT_STARTUP_TIMEOUT_MS,
  DEFAULT_STOP_ON_ERROR,
  resolveGatewayKernelOptions,
} from './gateway-kernel-options.js';
export type {
  GatewayHealth,
  GatewaySetEventMap,
  GatewaySetOptions,
  PlacedKernel,
  PlaceKernel,
  PlacementRequest,
} from './gateway-set.js';
export {
  DEFAULT_FAILURES_BEFORE_DOWN,
  DEFAULT_HEALTH_INTERVAL_MS,
  DEFAULT_HEALTH_TIMEOUT_MS,
  fewestKernels,
  GatewaySet,
} from './gateway-set.js';
export type { KernelInfo } from './handshake.js';
export type { GatewayKernelEventMap, GatewayKernelListener, KernelStatus } from './kernel-events.js';
export { isKernelId, KERNEL_ID_PATTERN } from './kernel-id.js';
export type {
  JournalNumber,
  KernelJournalCapability,
  KernelJournalPage,
  KernelJournalQuery,
} from './kernel-journal.js';
export { KERNEL_JOURNAL_VERSION, kernelJournalCapability } from './kernel-journal.js';
export { checkCreateEnv, defaultKernelUsername, isUuidV4, MAX_ENV_VALUE_LENGTH } from './launch-env.js';
export type { KernelLimitReading } from './limit-deaths.js';
export type { RecoveryPolicy } from './restart-recovery.js';
export type { CleanupRetryPolicy } from './start-cleanup.js';
export { decodeLegacy, decodeV1 } from './wire.js';
