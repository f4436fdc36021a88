import type { KernelHandle } from '@kernelwarden/core';
import type { GatewayKernel } from '@kernelwarden/gateway-client';
import type { Lease, SupervisedKernel } from '@kernelwarden/supervisor';
import type { Watchdog } from '@kernelwarden/watchdog';
import { describe, expectTypeOf, it } from 'vitest';

/** The lease the watchdog's `run()` takes, and the kernel it drives through it. */
type WatchdogLease = NonNullable<Parameters<Watchdog['run']>[0]['lease']>;
/** The watchdog runs cells with `execute` and climbs its ladder with kill/restart: all must be there. */
type WatchdogKernel = SupervisedKernel & Required<Pick<SupervisedKernel, 'execute' | 'kill' | 'restart'>>;

// Checked by `tsc --build` (this file is part of the package's project) and run by vitest: the CLI puts
// GatewayKernel into a KernelSupervisor and the watchdog climbs its ladder on those leases, so both interfaces
// must accept it.
describe('GatewayKernel fits the interfaces the CLI plugs it into', () => {
  it("satisfies core's KernelHandle", () => {
    expectTypeOf<GatewayKernel>().toExtend<KernelHandle>();
  });

  it("satisfies the supervisor's SupervisedKernel", () => {
    expectTypeOf<GatewayKernel>().toExtend<SupervisedKernel>();
  });

  it("satisfies the watchdog's kernel interface: execute, kill and restart present, and its lease accepted by run()", () => {
    expectTypeOf<GatewayKernel>().toExtend<WatchdogKernel>();
    expectTypeOf<Lease<GatewayKernel>>().toExtend<WatchdogLease>();
  });
});
