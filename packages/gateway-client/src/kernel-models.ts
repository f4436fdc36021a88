// The schemas of the gateway's kernel and kernelspec answers, and the types they give.
import { lazy } from '@kernelwarden/core';
import type { z } from 'zod/v3';
import { KERNEL_ID_PATTERN } from './kernel-id.js';
import { zod } from './zod.js';

type Zod = typeof z;

function kernelModelSchema(z: Zod) {
  return z
    .object({
      id: z.string().regex(KERNEL_ID_PATTERN, 'must be a kernel id: 1 to 128 letters, digits, "-" or "_"'),
      name: z.string(),
      last_activity: z.string().optional(),
      execution_state: z.string().optional(),
      connections: z.number().finite().optional(),
    })
    .passthrough();
}

/** A kernel as the gateway lists it. */
export type KernelModel = z.output<ReturnType<typeof kernelModelSchema>>;

function kernelSpecsSchema(z: Zod) {
  const kernelSpecModel = z
    .object({
      name: z.string(),
      spec: z
        .object({
          argv: z.array(z.string()),
          display_name: z.string(),
          language: z.string(),
          env: z.record(z.string(), z.string()).optional(),
          interrupt_mode: z.string().optional(),
          metadata: z.record(z.string(), z.unknown()).optional(),
        })
        .passthrough(),
      resources: z.record(z.string(), z.unknown()).optional(),
    })
    .passthrough();
  return {
    kernelSpecModel,
    kernelSpecsModel: z
      .object({
        default: z.string().nullable().optional(),
        kernelspecs: z.record(z.string(), kernelSpecModel),
      })
      .passthrough(),
  };
}

/** The answers' schemas, built on the first request that needs one (importing this module does not load zod). */
export const schemas = lazy(() => {
  const { z } = zod();
  const kernelModel = kernelModelSchema(z);
  return { kernelModel, kernelModels: z.array(kernelModel), ...kernelSpecsSchema(z) };
});

/** One kernelspec as `GET /api/kernelspecs` returns it. */
export type KernelSpecModel = z.output<ReturnType<typeof kernelSpecsSchema>['kernelSpecModel']>;
/** The answer of `GET /api/kernelspecs`. */
export type KernelSpecsModel = z.output<ReturnType<typeof kernelSpecsSchema>['kernelSpecsModel']>;
