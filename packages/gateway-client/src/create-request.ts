// The body of a kernel create (`POST /api/kernels`): its one id, checked, and its launch environment.
import { randomUUID } from 'node:crypto';
import { InvalidKernelIdError } from './errors.js';
import { checkedKernelId } from './kernel-id.js';
import { createEnv, isUuidV4 } from './launch-env.js';

/** What a create asks for (`GatewayClient.createKernel`'s `spec`). */
export interface CreateSpec {
  name: string;
  env?: Record<string, string>;
  path?: string;
  kernelId?: string;
  waitMs?: number;
  launchTimeoutMs?: number;
}

/**
 * The create's id (`kernelId`, else `env.KERNEL_ID`, else a fresh UUID v4; anything but a lowercase UUID v4 throws
 * `InvalidKernelIdError`) and the request body sending it as `kernel_id` and `env.KERNEL_ID`, with the checked
 * launch environment (`createEnv`; `username()` when `env` names no `KERNEL_USERNAME`) and `waitMs` as
 * `kernelwarden_wait_ms`. `subject` names the create in errors.
 */
export function createRequestBody(
  spec: CreateSpec,
  username: () => string,
  subject: string,
): { chosen: string; body: Record<string, unknown> } {
  const chosen = spec.kernelId ?? spec.env?.KERNEL_ID ?? randomUUID();
  if (!isUuidV4(chosen)) {
    checkedKernelId(chosen, 'GatewayClient.createKernel');
    throw new InvalidKernelIdError(
      `GatewayClient.createKernel refused kernel id ${JSON.stringify(chosen).slice(0, 80)}: a create's id is a UUID v4 in lowercase (it is sent as kernel_id and KERNEL_ID)`,
      { kernelId: JSON.stringify(chosen).slice(0, 80) },
    );
  }
  const env = createEnv({
    env: spec.env,
    kernelId: chosen,
    username: spec.env?.KERNEL_USERNAME ?? username(),
    launchTimeoutMs: spec.launchTimeoutMs,
    subject,
  });
  const body: Record<string, unknown> = { name: spec.name };
  if (spec.path !== undefined) body.path = spec.path;
  body.env = env;
  body.kernel_id = chosen;
  if (spec.waitMs !== undefined) body.kernelwarden_wait_ms = Math.max(0, Math.floor(spec.waitMs));
  return { chosen, body };
}
