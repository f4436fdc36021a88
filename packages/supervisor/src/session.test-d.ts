import type { GatewayKernel } from '@kernelwarden/gateway-client';
import { RecordingKernel } from '@kernelwarden/testkit';
import { describe, expectTypeOf, it } from 'vitest';
import type { CellExecutor, CellRunRequest } from './executor.js';
import type { LanguageSlot, LanguageSlotStatus } from './language-slot.js';
import { createLanguageSlot } from './lazy-language-slot.js';
import type { Lease, SupervisedKernel } from './lease.js';
import { KernelSession } from './session.js';
import type { SessionLanguage } from './session-status.js';
import type { SlotSupervisor } from './slot-supervisor.js';
import type { KernelSupervisor } from './supervisor.js';

// Type-checked by `tsc --build`: the languages a session accepts follow from its slots, and the executor and
// language-slot contracts take a supervisor of any kernel type without `any`.
declare const r: LanguageSlot;
const python = () => new RecordingKernel('python');
const julia = createLanguageSlot({ language: 'julia', spawn: () => new RecordingKernel('julia') });

describe('KernelSession languages', () => {
  it("takes 'python' | 'r' with an R slot, and rejects a language it has no slot for", () => {
    const session = new KernelSession({ python, r });
    expectTypeOf(session.execute).parameter(1).exclude<undefined>().toHaveProperty('language');
    void session.execute('1', { language: 'r' });
    // @ts-expect-error: no julia slot
    void session.execute('1', { language: 'julia' });
  });

  it('takes the names of its slots', () => {
    const session = new KernelSession({ python, slots: { julia } });
    expectTypeOf(session.languages).toEqualTypeOf<SessionLanguage<'julia'>[]>();
    void session.execute('1', { language: 'julia' });
    session.setSlotEnv('julia', '1.11');
    // @ts-expect-error: python's environment is setEnv's
    session.setSlotEnv('python', 'x');
    expectTypeOf(session.status().slots.julia).toEqualTypeOf<LanguageSlotStatus | undefined>();
    expectTypeOf(julia.language).toEqualTypeOf<'julia'>();
  });

  it('takes an explicit kernel type, r and its environment', () => {
    const session = new KernelSession<RecordingKernel>({ python, r, slotEnvs: { r: 'r-base' } });
    expectTypeOf(session.supervisor).toEqualTypeOf<KernelSupervisor<RecordingKernel>>();
    expectTypeOf(session.status().slots.r).toEqualTypeOf<LanguageSlotStatus | undefined>();
    // @ts-expect-error: the R environment is slotEnvs.r
    void new KernelSession<RecordingKernel>({ python, r, rEnv: 'r-base' });
  });
});

describe('executor and language-slot contracts', () => {
  it('accept a supervisor, a request and a lease of any kernel type', () => {
    expectTypeOf<KernelSupervisor<GatewayKernel>>().toExtend<SlotSupervisor>();
    expectTypeOf<CellRunRequest<GatewayKernel>>().toExtend<CellRunRequest>();
    expectTypeOf<CellExecutor['run']>().parameter(0).toEqualTypeOf<CellRunRequest<SupervisedKernel>>();
    expectTypeOf<LanguageSlot<GatewayKernel>>().toExtend<LanguageSlot>();
    expectTypeOf<Lease<GatewayKernel>>().toExtend<Lease>();
  });
});
