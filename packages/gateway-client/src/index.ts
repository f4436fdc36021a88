export type { ReconnectPolicy, WireProtocol } from './channel.js';
export type { KernelDeathReason } from './errors.js';
export {
  GatewayAuthError,
  GatewayRequestError,
  GatewayUnavailableError,
  KernelDiedError,
  KernelStartError,
  ProtocolError,
} from './errors.js';
export type { OutputCaps } from './execution.js';
export { DEFAULT_OUTPUT_CAPS, DEFAULT_REPLY_GRACE_MS, MISSING_REPLY_ENAME } from './execution.js';
export type {
  GatewayClientOptions,
  KernelDiagnostics,
  KernelModel,
  KernelOwnership,
  KernelSpecModel,
  KernelSpecsModel,
  RequestOptions,
  WebSocketClass,
} from './gateway-client.js';
export { GatewayClient } from './gateway-client.js';
export type { GatewayKernelStartOptions, KernelInfo } from './gateway-kernel.js';
export { GatewayKernel } from './gateway-kernel.js';
export type { GatewayKernelEventMap, GatewayKernelListener, KernelStatus } from './kernel-events.js';
export type {
  LocalGatewayErrorCode,
  LocalGatewayEvent,
  LocalGatewayLease,
  LocalGatewayLocation,
  LocalGatewayOptions,
  LocalGatewayStatus,
  LocalGatewayStopOptions,
} from './local-gateway.js';
export { LocalGateway, LocalGatewayError } from './local-gateway.js';
export { LOCAL_GATEWAY_SERVER_CONFIG } from './local-gateway-server-config.js';
export type { ChannelName, JupyterMessage, MessageHeader } from './message.js';
export { createMessage } from './message.js';
export type { CleanupRetryPolicy } from './start-cleanup.js';
export { decodeLegacy, encodeLegacy } from './wire-legacy.js';
export { decodeV1, encodeV1, V1_SUBPROTOCOL } from './wire-v1.js';
