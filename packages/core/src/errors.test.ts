import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { DeadlineExceededError, InvalidOptionsError, isTimeoutError, KernelwardenError } from './errors.js';

class GatewayLikeError extends KernelwardenError {
  static override readonly brand: string = 'GatewayLikeError';
  constructor(message: string, cause?: unknown) {
    super(message, { code: 'GATEWAY_LIKE', cause, retryable: true });
  }
}
class OtherError extends KernelwardenError {
  static override readonly brand: string = 'OtherError';
  constructor() {
    super('other', { code: 'OTHER' });
  }
}

describe('KernelwardenError', () => {
  it('carries name, code, cause and retryable', () => {
    const cause = new TypeError('fetch failed');
    const error = new GatewayLikeError('gateway down', cause);
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe('GatewayLikeError');
    expect(error.code).toBe('GATEWAY_LIKE');
    expect(error.cause).toBe(cause);
    expect(error.retryable).toBe(true);
    expect(new OtherError().retryable).toBe(false);
    expect(new OtherError().cause).toBeUndefined();
  });

  it('recognises subclasses by brand, and only their own', () => {
    const error = new GatewayLikeError('x');
    expect(KernelwardenError.isInstance(error)).toBe(true);
    expect(GatewayLikeError.isInstance(error)).toBe(true);
    expect(OtherError.isInstance(error)).toBe(false);
    expect(KernelwardenError.isInstance(new Error('plain'))).toBe(false);
    expect(KernelwardenError.isInstance(null)).toBe(false);
    expect(KernelwardenError.isInstance('KernelwardenError')).toBe(false);
    expect(KernelwardenError.isInstance({ name: 'KernelwardenError', code: 'X' })).toBe(false);
  });

  it('keeps the brand off the enumerable properties (JSON and spreads stay clean)', () => {
    const error = new GatewayLikeError('x');
    expect(Object.keys(error)).toEqual(['code', 'retryable']);
    expect(JSON.stringify(error)).toBe('{"code":"GATEWAY_LIKE","retryable":true}');
  });

  it('lets a deadline error be named TimeoutError', () => {
    const error = new DeadlineExceededError('took too long', { timeoutMs: 5 });
    expect(error.name).toBe('TimeoutError');
    expect(error.code).toBe('DEADLINE_EXCEEDED');
    expect(error.timeoutMs).toBe(5);
    expect(error.retryable).toBe(true);
    expect(isTimeoutError(error)).toBe(true);
    expect(isTimeoutError(new DOMException('t', 'TimeoutError'))).toBe(true);
    expect(isTimeoutError(new Error('t'))).toBe(false);
    expect(DeadlineExceededError.isInstance(error)).toBe(true);
  });

  it('names the bad field of invalid options', () => {
    const error = new InvalidOptionsError(
      [
        { path: 'policy.cellTimeoutMs', message: 'expected a number' },
        { path: 'policy.clock', message: 'expected a clock' },
      ],
      { subject: 'watchdog policy' },
    );
    expect(error.message).toBe('Invalid watchdog policy at "policy.cellTimeoutMs": expected a number (and 1 more)');
    expect(error.path).toBe('policy.cellTimeoutMs');
    expect(error.code).toBe('INVALID_OPTIONS');
    expect(error.issues).toHaveLength(2);
  });
});

describe('KernelwardenError across duplicate installs', () => {
  const here = dirname(fileURLToPath(import.meta.url));
  const built = join(here, '..', 'dist', 'index.js');
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  async function loadCopy(): Promise<typeof import('./index.js')> {
    const dir = mkdtempSync(join(tmpdir(), 'kw-core-copy-'));
    dirs.push(dir);
    copyFileSync(built, join(dir, 'index.js'));
    return import(pathToFileURL(join(dir, 'index.js')).href);
  }

  it('recognises an error made by another copy of the package, where instanceof fails', async () => {
    const a = await loadCopy();
    const b = await loadCopy();
    expect(a.KernelwardenError).not.toBe(b.KernelwardenError);
    const fromA = new a.DeadlineExceededError('late');
    expect(fromA instanceof b.KernelwardenError).toBe(false);
    expect(b.KernelwardenError.isInstance(fromA)).toBe(true);
    expect(b.DeadlineExceededError.isInstance(fromA)).toBe(true);
    expect(b.InvalidOptionsError.isInstance(fromA)).toBe(false);
    expect(KernelwardenError.isInstance(fromA)).toBe(true);
  });
});
