import { KernelStartError } from './errors.js';

/**
 * The code of a kernel's environment step, for its language (`kernel_info_reply`'s `language_info.name`): Python
 * `os.chdir` / `os.environ.update`, R `setwd` / `Sys.setenv`; it prints nothing and leaves no names behind. Throws
 * `KernelStartError` for any other language.
 */
export function environmentCode(
  language: string,
  cwd: string | undefined,
  env: Record<string, string> | undefined,
): string {
  const name = language.toLowerCase();
  if (name === 'python') {
    return ['import os as _kernelwarden_os', ...pythonSteps(cwd, env, ''), 'del _kernelwarden_os'].join('\n');
  }
  if (name === 'r') {
    const lines: string[] = [];
    if (cwd !== undefined) lines.push(`setwd(${JSON.stringify(cwd)})`);
    const entries = Object.entries(env ?? {});
    if (entries.length > 0) {
      const names = entries.map(([k]) => JSON.stringify(k)).join(', ');
      const values = entries.map(([, v]) => JSON.stringify(v)).join(', ');
      lines.push(`invisible(do.call(Sys.setenv, setNames(as.list(c(${values})), c(${names}))))`);
    }
    lines.push('invisible(NULL)');
    return lines.join('\n');
  }
  throw new KernelStartError(
    `Failed to initialize kernel environment: cwd/env are supported for Python and R kernels, not "${name || 'unknown'}"`,
  );
}

/** What every cell of a kernel whose environment step (sent ahead) failed raises instead of running. */
const REFUSAL = 'the cwd/env of this kernel could not be set: it runs nothing';

/**
 * The environment step of an IPython kernel sent ahead of the cells that follow it: if it fails, it first makes every
 * later cell of the kernel raise before any of its code runs (an IPython input transformer that replaces the cell),
 * then raises its own error; it prints nothing and leaves no names behind either way.
 */
export function environmentCodeAhead(cwd: string | undefined, env: Record<string, string> | undefined): string {
  const lines = ['import os as _kernelwarden_os', 'try:', ...pythonSteps(cwd, env, '    ')];
  lines.push(
    '    pass',
    'except BaseException:',
    `    get_ipython().input_transformers_cleanup.insert(0, lambda lines: ['raise RuntimeError("${REFUSAL}")\\n'])`,
    '    raise',
    'finally:',
    '    del _kernelwarden_os',
  );
  return lines.join('\n');
}

/** The Python statements of the step (`os` imported as `_kernelwarden_os`), each line starting with `indent`. */
function pythonSteps(cwd: string | undefined, env: Record<string, string> | undefined, indent: string): string[] {
  const lines: string[] = [];
  if (cwd !== undefined) lines.push(`${indent}_kernelwarden_os.chdir(${JSON.stringify(cwd)})`);
  if (env !== undefined) lines.push(`${indent}_kernelwarden_os.environ.update(${JSON.stringify(env)})`);
  return lines;
}
