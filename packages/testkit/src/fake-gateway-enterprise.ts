import { randomUUID } from 'node:crypto';
import type { FakeGatewayOptions } from './fake-gateway-types.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** An Enterprise Gateway create's refusal: its HTTP status and the `reason` and `message` of its body. */
export interface LaunchRefusal {
  refused: true;
  status: number;
  reason: string;
  message?: string;
}

/** A create Enterprise Gateway accepts: the kernel's id, its user and its launch environment. */
export interface LaunchRequest {
  id: string;
  username: string;
  env: Record<string, string>;
}

/** What the gateway runs now: its live kernels' users and the users of the launches in progress. */
export interface LaunchLoad {
  kernelUsers: readonly (string | undefined)[];
  launchingUsers: readonly string[];
}

/**
 * The create's `env` as Enterprise Gateway keeps it: `KERNEL_*` and `clientEnvs` names only, each a string of at most
 * 4,096 characters without `$`, a backtick, CR, LF or NUL; else the refusal (400).
 */
function launchEnv(
  given: Record<string, unknown>,
  clientEnvs: readonly string[],
): { env: Record<string, string> } | LaunchRefusal {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(given)) {
    if (!key.startsWith('KERNEL_') && !clientEnvs.includes('*') && !clientEnvs.includes(key)) continue;
    if (typeof value !== 'string') {
      return {
        refused: true,
        status: 400,
        reason: 'Bad Request',
        message: `Environment variable '${key}' value must be a string`,
      };
    }
    if (value.length > 4096) {
      return {
        refused: true,
        status: 400,
        reason: 'Bad Request',
        message: `Environment variable '${key}' exceeds maximum length`,
      };
    }
    if (/[$`\r\n\0]/.test(value)) {
      return {
        refused: true,
        status: 400,
        reason: 'Bad Request',
        message: `Environment variable '${key}' contains prohibited characters`,
      };
    }
    env[key] = value;
  }
  return { env };
}

/**
 * Checks an Enterprise Gateway create against its limits and env rules, in EG's order: `maxKernels` (403), the env
 * (400), `KERNEL_ID` a UUID v4 (500), `maxKernelsPerUser` (403). `KERNEL_USERNAME` and `KERNEL_ID` are filled in.
 */
export function checkLaunch(
  body: Record<string, unknown>,
  opts: FakeGatewayOptions,
  load: LaunchLoad,
): LaunchRequest | LaunchRefusal {
  if (opts.maxKernels !== undefined && load.kernelUsers.length + load.launchingUsers.length >= opts.maxKernels) {
    return { refused: true, status: 403, reason: 'Forbidden', message: 'Resource Limit' };
  }
  if (body.env !== undefined && (typeof body.env !== 'object' || body.env === null || Array.isArray(body.env))) {
    return { refused: true, status: 400, reason: 'Bad Request' };
  }
  const checked = launchEnv((body.env ?? {}) as Record<string, unknown>, opts.clientEnvs ?? []);
  if ('refused' in checked) return checked;
  const accepted = checked.env;
  const username = accepted.KERNEL_USERNAME ?? 'enterprise-gateway';
  accepted.KERNEL_USERNAME = username;
  if (accepted.KERNEL_ID !== undefined && !UUID_V4.test(accepted.KERNEL_ID)) {
    return {
      refused: true,
      status: 500,
      reason: 'Internal Server Error',
      message: `Invalid v4 UUID value detected in ['env']['KERNEL_ID']`,
    };
  }
  const id = accepted.KERNEL_ID ?? randomUUID();
  accepted.KERNEL_ID = id;
  if (opts.maxKernelsPerUser !== undefined) {
    const mine =
      load.kernelUsers.filter((u) => u === username).length + load.launchingUsers.filter((u) => u === username).length;
    if (mine >= opts.maxKernelsPerUser) {
      return {
        refused: true,
        status: 403,
        reason: 'Forbidden',
        message: `A max kernels per user limit has been set to ${opts.maxKernelsPerUser} and user '${username}' currently has ${mine} active and pending ${mine === 1 ? 'kernel' : 'kernels'}.`,
      };
    }
  }
  return { id, username, env: accepted };
}
