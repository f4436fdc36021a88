import { InvalidOptionsError } from './errors.js';

/** One problem a schema found, as zod reports it: where (`['gateway', 'baseUrl']`) and what. */
export interface OptionsIssue {
  /** The keys from the options object down to the bad field. */
  readonly path: readonly PropertyKey[];
  /** What is wrong with it. */
  readonly message: string;
}

/**
 * The part of a schema that `parseOptions` uses: a zod schema has it, so does any object with the same `safeParse`.
 *
 * Declared here, without importing zod, so that core keeps no dependency.
 */
export interface OptionsSchema<T> {
  /** Validates `value`, returning the parsed output or the issues found. */
  safeParse(
    value: unknown,
  ): { success: true; data: T } | { success: false; error: { issues: readonly OptionsIssue[] } };
}

/**
 * Parses caller options with a schema; on failure throws `InvalidOptionsError` naming each bad field's dotted path
 * (`'gateway.baseUrl'`, `'serverArgs.1'`), with the schema's error as `cause`.
 *
 * Use it at the top of every public function that takes an options object, so that all report bad options alike.
 */
export function parseOptions<T>(schema: OptionsSchema<T>, value: unknown, subject: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((issue) => ({
    path: issue.path.map(String).join('.'),
    message: issue.message,
  }));
  throw new InvalidOptionsError(issues, { subject, cause: parsed.error });
}
