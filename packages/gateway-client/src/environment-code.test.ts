import { describe, expect, it } from 'vitest';
import { environmentCode } from './environment-code.js';

describe('environmentCode', () => {
  it('writes Python that changes directory and environment and leaves no name behind', () => {
    expect(environmentCode('python', '/tmp/a "b"', { A: '1', 'B C': "it's" })).toBe(
      [
        'import os as _kernelwarden_os',
        '_kernelwarden_os.chdir("/tmp/a \\"b\\"")',
        `_kernelwarden_os.environ.update({"A":"1","B C":"it's"})`,
        'del _kernelwarden_os',
      ].join('\n'),
    );
    expect(environmentCode('Python', undefined, { A: '1' })).not.toContain('chdir');
  });

  it('writes R that prints nothing', () => {
    expect(environmentCode('R', '/tmp', { A: '1', B: '2' })).toBe(
      [
        'setwd("/tmp")',
        'invisible(do.call(Sys.setenv, setNames(as.list(c("1", "2")), c("A", "B"))))',
        'invisible(NULL)',
      ].join('\n'),
    );
    expect(environmentCode('r', '/tmp', {})).toBe('setwd("/tmp")\ninvisible(NULL)');
  });

  it('refuses other languages with KernelStartError', () => {
    expect(() => environmentCode('julia', '/tmp', undefined)).toThrow(
      /supported for Python and R kernels, not "julia"/,
    );
    expect(() => environmentCode('', '/tmp', undefined)).toThrow(/not "unknown"/);
  });
});
