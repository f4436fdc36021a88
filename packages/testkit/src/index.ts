export type { FakeCloseEvent, FakeErrorEvent, FakeWebSocketData, FakeWebSocketOpenOptions } from './fake-websocket.js';
export { FakeWebSocket } from './fake-websocket.js';
export { Gate } from './gate.js';
export type { FetchCall, FetchHandler, FetchHook } from './hook-fetch.js';
export { hookFetch } from './hook-fetch.js';
export type { ManualClockOptions } from './manual-clock.js';
export { ManualClock } from './manual-clock.js';
export type { RecordingKernelOptions, RecordingKernelScript } from './recording-kernel.js';
export { okResult, RecordingKernel, RecordingKernelError } from './recording-kernel.js';
