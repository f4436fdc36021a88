import { InvalidOptionsError } from './errors.js';

/** One problem a schema found: where (property keys from the options' root) and what. */
export interface OptionsSchemaIssue {
  readonly path: readonly PropertyKey[];
  readonly message: string;
  /** zod's issue code; `'unrecognized_keys'` issues name the unknown fields in `keys`. */
  readonly code?: string;
  readonly keys?: readonly string[];
}

/**
 * What `parseOptions` needs of a schema: a `safeParse` answering with the parsed value or the issues. A zod schema
 * fits it as it is, so core depends on no validation library.
 */
export interface OptionsSchema<T> {
  safeParse(
    value: unknown,
  ): { success: true; data: T } | { success: false; error: { readonly issues: readonly OptionsSchemaIssue[] } };
}

/** How `parseOptions` names what it checks. */
export interface ParseOptionsContext {
  /** Names the options in the error message: `Invalid watchdog policy at "policy.killGraceMs": …`. */
  subject: string;
  /** The prefix of every issue's path (`'options'` gives `options.pool.size`). @defaultValue no prefix */
  root?: string;
}

/**
 * Parses caller options with a schema (zod's, or any with the same `safeParse`); on failure throws
 * `InvalidOptionsError` with one issue per bad field, each with its dotted path, and the schema's error as `cause`.
 * An unknown field is reported at its own path (`policy.cellTimeout`).
 *
 * Use it in every options resolver, so that all packages report bad options the same way. A string names the
 * subject alone (no path prefix).
 */
export function parseOptions<T>(
  schema: OptionsSchema<T>,
  value: unknown,
  subjectOrContext: ParseOptionsContext | string,
): T {
  const context = typeof subjectOrContext === 'string' ? { subject: subjectOrContext } : subjectOrContext;
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.flatMap((issue) => {
    const at = issue.path.map(String);
    if (issue.code === 'unrecognized_keys' && issue.keys && issue.keys.length > 0) {
      return issue.keys.map((key) => ({ path: dotted(context.root, [...at, key]), message: 'is not a known field' }));
    }
    return [{ path: dotted(context.root, at), message: issue.message }];
  });
  throw new InvalidOptionsError(issues, { subject: context.subject, cause: parsed.error });
}

function dotted(root: string | undefined, path: readonly string[]): string {
  return [...(root === undefined || root === '' ? [] : [root]), ...path].join('.');
}
