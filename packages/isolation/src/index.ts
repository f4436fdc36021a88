export type { SandboxPolicy, WrapCommandOptions } from './bubblewrap.js';
export { SANDBOX_UNSET_ENV, wrapCommand } from './bubblewrap.js';
export type { CgroupController, CgroupControllerName, CgroupDetection, KernelLimitEvents } from './cgroup.js';
export { kernelLimitEvents } from './cgroup.js';
export type { IsolationUnavailableReason } from './errors.js';
export { IsolationPolicyError, IsolationUnavailableError } from './errors.js';
export type { IsolationGateway, PrepareIsolatedKernelOptions } from './gateway-kernelspec.js';
export { prepareIsolatedKernel } from './gateway-kernelspec.js';
export type { BaseKernelSpec, InstallIsolatedKernelSpecOptions } from './kernelspec.js';
export { installIsolatedKernelSpec, kernelwardenStateDir } from './kernelspec.js';
export type { RemoveIsolatedKernelSpecsOptions, SweepIsolatedKernelSpecsOptions } from './kernelspec-cleanup.js';
export {
  removeIsolatedKernelSpec,
  removeIsolatedKernelSpecs,
  sweepIsolatedKernelSpecs,
  UNKNOWN_OWNER_MAX_AGE_MS,
} from './kernelspec-cleanup.js';
export type {
  CgroupLimit,
  DetectLimitsOptions,
  LimitFacts,
  LimitMechanism,
  LimitPlan,
  LimitStatus,
  LimitSupport,
} from './limit-support.js';
export { detectLimits, planLimits } from './limit-support.js';
export type { KernelLimits, LimitName } from './limits.js';
export { MIN_MEMORY_BYTES, MIN_PROCESSES } from './limits.js';
export type { IsolationPolicy, KernelPolicyOptions, LabelledPath, ReadIsolationPolicyOptions } from './policy.js';
export { createKernelPolicy, createReadIsolationPolicy } from './policy.js';
export type { IsolationReport, VerifyIsolationOptions } from './probe.js';
export { verifyIsolation } from './probe.js';
export type { DetectSandboxOptions, SandboxStatus } from './sandbox.js';
export { assertSandbox, detectSandbox } from './sandbox.js';
export type { TeamDataRoot, TeamReadPolicyOptions } from './team-policy.js';
export { artifactInputDir, prepareTeamDirectories, teamReadPolicy } from './team-policy.js';
