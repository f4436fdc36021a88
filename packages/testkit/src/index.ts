export type { JupyterMessage, OutgoingMessage, WireFormat } from '@kernelwarden/jupyter-protocol';
export { decodeFrame, encodeFrame, V1_SUBPROTOCOL, WireFormatError } from '@kernelwarden/jupyter-protocol';
export { FakeGateway } from './fake-gateway.js';
export type {
  FakeGatewayOptions,
  FakeGatewayRoute,
  FakeKernelSpec,
  FaultAnswer,
  RecordedFrame,
  RecordedRequest,
} from './fake-gateway-types.js';
export type { DieOptions, FakeKernelOptions, KernelScript, KernelScriptContext } from './fake-kernel.js';
export { FakeKernel } from './fake-kernel.js';
export { pythonLikeScript } from './fake-kernel-script.js';
export type { FakeCloseEvent, FakeErrorEvent, FakeWebSocketData, FakeWebSocketOpenOptions } from './fake-websocket.js';
export { FakeWebSocket } from './fake-websocket.js';
export { Gate } from './gate.js';
export type { FetchCall, FetchHandler, FetchHook } from './hook-fetch.js';
export { hookFetch } from './hook-fetch.js';
export type { ManualClockOptions } from './manual-clock.js';
export { ManualClock } from './manual-clock.js';
export type { RecordingKernelOptions, RecordingKernelScript } from './recording-kernel.js';
export { okResult, RecordingKernel, RecordingKernelError } from './recording-kernel.js';
