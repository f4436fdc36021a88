import { InvalidOptionsError } from '@kernelwarden/core';
import type { z } from 'zod';

/**
 * Parses caller options with a zod schema; on failure throws core's `InvalidOptionsError` naming each bad field's
 * dotted path (`'gateway.baseUrl'`), with the `ZodError` as `cause`.
 */
export function parseOptions<S extends z.ZodType>(schema: S, value: unknown, subject: string): z.output<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((issue) => ({
    path: issue.path.map(String).join('.'),
    message: issue.message,
  }));
  throw new InvalidOptionsError(issues, { subject, cause: parsed.error });
}
