import { InvalidOptionsError, isClock } from '@kernelwarden/core';
import type { KernelSessionOptions } from './session.js';

type Issue = { path: string; message: string };

/**
 * Checks `new KernelSession()` options and throws `InvalidOptionsError` naming every bad field's path
 * (`options.pool.size`, `options.readIsolation.roots`, …).
 */
export function validateSessionOptions(opts: KernelSessionOptions<any, any>): void {
  if (opts === null || typeof opts !== 'object') {
    throw new InvalidOptionsError([{ path: 'options', message: 'expected an object' }], { subject: 'session options' });
  }
  const issues: Issue[] = [];
  const fn = (name: keyof KernelSessionOptions<any, any>, required = false) => {
    const value = opts[name];
    if (value === undefined ? required : typeof value !== 'function') {
      issues.push({
        path: `options.${name}`,
        message: required ? 'expected a kernel factory function' : 'expected a function',
      });
    }
  };
  const optionalString = (name: 'env' | 'rEnv' | 'cwd') => {
    const value = opts[name];
    if (value !== undefined && (typeof value !== 'string' || value.length === 0)) {
      issues.push({ path: `options.${name}`, message: 'expected a non-empty string' });
    }
  };
  const count = (path: string, value: unknown, min: number) => {
    if (value !== undefined && (typeof value !== 'number' || !Number.isInteger(value) || value < min)) {
      issues.push({ path, message: `expected an integer >= ${min}` });
    }
  };
  fn('python', true);
  fn('bootstrap');
  fn('createHost');
  optionalString('env');
  optionalString('rEnv');
  optionalString('cwd');
  if (opts.r !== undefined) {
    const r = opts.r as unknown as Record<string, unknown>;
    if (r === null || typeof r !== 'object') issues.push({ path: 'options.r', message: 'expected a LanguageSlot' });
    else {
      if (typeof r.language !== 'string') issues.push({ path: 'options.r.language', message: 'expected a string' });
      for (const method of ['ensure', 'lease', 'execute', 'shutdown', 'status']) {
        if (typeof r[method] !== 'function')
          issues.push({ path: `options.r.${method}`, message: 'expected a function' });
      }
    }
  }
  if (opts.executor !== undefined && (opts.executor === null || typeof opts.executor.run !== 'function')) {
    issues.push({ path: 'options.executor.run', message: 'expected a CellExecutor with run()' });
  }
  if (opts.readIsolation !== undefined) {
    const policy = opts.readIsolation as unknown as Record<string, unknown>;
    if (policy === null || typeof policy !== 'object') {
      issues.push({ path: 'options.readIsolation', message: 'expected a ReadIsolationPolicy' });
    } else {
      for (const field of ['roots', 'allowedRoots']) {
        const list = policy[field];
        if (!Array.isArray(list) || !list.every((item) => typeof item === 'string')) {
          issues.push({ path: `options.readIsolation.${field}`, message: 'expected an array of paths' });
        }
      }
    }
  }
  if (opts.pool !== undefined) {
    if (opts.pool === null || typeof opts.pool !== 'object')
      issues.push({ path: 'options.pool', message: 'expected { size }' });
    else count('options.pool.size', opts.pool.size ?? Number.NaN, 0);
  }
  if (opts.idleTtlMs !== undefined && (typeof opts.idleTtlMs !== 'number' || Number.isNaN(opts.idleTtlMs))) {
    issues.push({ path: 'options.idleTtlMs', message: 'expected a number of milliseconds' });
  }
  if (opts.clock !== undefined && !isClock(opts.clock)) {
    issues.push({ path: 'options.clock', message: 'expected a Clock with now() and setTimer()' });
  }
  count('options.maxBackground', opts.maxBackground, 1);
  count('options.maxPeekChars', opts.maxPeekChars, 1);
  if (issues.length > 0) throw new InvalidOptionsError(issues, { subject: 'session options' });
}
