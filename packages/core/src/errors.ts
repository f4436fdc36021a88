const BRAND = Symbol.for('kernelwarden.error');

/** Options every kernelwarden error accepts. */
export interface KernelwardenErrorOptions {
  /** Stable machine-readable code, e.g. `'KERNEL_DIED'`. */
  code: string;
  /** The error that caused this one (a fetch `TypeError`, a ws error, …). */
  cause?: unknown;
  /** Whether trying the same operation again may succeed. @defaultValue false */
  retryable?: boolean;
  /** Overrides `name`; deadlines use `'TimeoutError'`. @defaultValue the class's `brand` */
  name?: string;
}

type ErrorClass = { readonly brand: string };

/**
 * The base of every error kernelwarden throws: `name`, a stable `code`, `cause` and `retryable`.
 *
 * Recognise errors with `KernelwardenError.isInstance(e)` (or `SubClass.isInstance(e)`): unlike `instanceof`, it
 * works when two copies of a package are installed, through a `Symbol.for('kernelwarden.error')` brand.
 */
export class KernelwardenError extends Error {
  /** The brand that `isInstance` looks for; every subclass declares its own. */
  static readonly brand: string = 'KernelwardenError';

  /** Stable machine-readable code. */
  readonly code: string;
  /** Whether trying the same operation again may succeed. */
  readonly retryable: boolean;

  constructor(message: string, options: KernelwardenErrorOptions) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    const brands: string[] = [];
    for (let c: unknown = new.target; typeof c === 'function' && c !== Error; c = Object.getPrototypeOf(c)) {
      if (Object.hasOwn(c, 'brand')) brands.push((c as unknown as ErrorClass).brand);
    }
    Object.defineProperty(this, BRAND, { value: Object.freeze(brands), enumerable: false });
    Object.defineProperty(this, 'name', {
      value: options.name ?? (new.target as unknown as ErrorClass).brand,
      enumerable: false,
      writable: true,
      configurable: true,
    });
    this.code = options.code;
    this.retryable = options.retryable ?? false;
  }

  /**
   * True when `error` was made by this class (or a subclass), from any installed copy of the package.
   *
   * Use it instead of `instanceof` in code that may see errors from a duplicate install.
   */
  static isInstance<T extends abstract new (...args: any) => KernelwardenError>(
    this: T & ErrorClass,
    error: unknown,
  ): error is InstanceType<T> {
    if (error === null || typeof error !== 'object') return false;
    const brands = (error as Record<symbol, unknown>)[BRAND];
    return Array.isArray(brands) && brands.includes(this.brand);
  }
}

/**
 * A deadline ran out. Its `name` is `'TimeoutError'`, as for `AbortSignal.timeout()`.
 *
 * Thrown by the deadline helpers; retryable, since the same call may succeed with more time.
 */
export class DeadlineExceededError extends KernelwardenError {
  static override readonly brand: string = 'DeadlineExceededError';
  /** The deadline that ran out, in milliseconds. */
  readonly timeoutMs: number | undefined;

  constructor(message: string, options: { timeoutMs?: number; cause?: unknown; code?: string } = {}) {
    super(message, {
      code: options.code ?? 'DEADLINE_EXCEEDED',
      cause: options.cause,
      retryable: true,
      name: 'TimeoutError',
    });
    this.timeoutMs = options.timeoutMs;
  }
}

/**
 * Options given to a kernelwarden API were invalid. `path` names the bad field (`'policy.cellTimeoutMs'`).
 *
 * Thrown synchronously by constructors and factories; never retryable.
 */
export class InvalidOptionsError extends KernelwardenError {
  static override readonly brand: string = 'InvalidOptionsError';
  /** Dotted path of the first bad field (empty for the options object itself). */
  readonly path: string;
  /** Every problem found, each with its path. */
  readonly issues: readonly { path: string; message: string }[];

  constructor(
    issues: readonly { path: string; message: string }[],
    options: { subject?: string; cause?: unknown } = {},
  ) {
    const first = issues[0] ?? { path: '', message: 'invalid' };
    const where = first.path ? ` at "${first.path}"` : '';
    const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : '';
    super(`Invalid ${options.subject ?? 'options'}${where}: ${first.message}${more}`, {
      code: 'INVALID_OPTIONS',
      cause: options.cause,
    });
    this.path = first.path;
    this.issues = issues;
  }
}

/** True for any error whose `name` is `'TimeoutError'` (ours, `AbortSignal.timeout()`'s, undici's). */
export function isTimeoutError(error: unknown): boolean {
  return error !== null && typeof error === 'object' && (error as { name?: unknown }).name === 'TimeoutError';
}
