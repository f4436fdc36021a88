// Type-checked by `tsc --build`, never run: gateway-client's deprecated LocalGateway types are structural copies of
// this package's, and must keep accepting (and being accepted as) what this package takes and returns.
import type * as deprecated from '@kernelwarden/gateway-client';
import type * as moved from './index.js';

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Fits<A, B> = [A] extends [B] ? true : false;

export const sameOptions: Same<deprecated.LocalGatewayOptions, moved.LocalGatewayOptions> = true;
export const sameStopOptions: Same<deprecated.LocalGatewayStopOptions, moved.LocalGatewayStopOptions> = true;
export const sameLocation: Same<deprecated.LocalGatewayLocation, moved.LocalGatewayLocation> = true;
export const sameEvent: Same<deprecated.LocalGatewayEvent, moved.LocalGatewayEvent> = true;
export const sameStatus: Same<deprecated.LocalGatewayStatus, moved.LocalGatewayStatus> = true;
export const sameLease: Same<deprecated.LocalGatewayLease, moved.LocalGatewayLease> = true;
// The forwarder has one code of its own (the package is not installed).
export const codesFit: Fits<moved.LocalGatewayErrorCode, deprecated.LocalGatewayErrorCode> = true;
export const sameAcquire: Same<
  typeof deprecated.LocalGateway.acquire,
  (options?: moved.LocalGatewayOptions) => Promise<moved.LocalGatewayLease>
> = true;
export const sameStop: Same<typeof deprecated.LocalGateway.stop, typeof moved.LocalGateway.stop> = true;
export const sameStatusCall: Same<typeof deprecated.LocalGateway.status, typeof moved.LocalGateway.status> = true;
