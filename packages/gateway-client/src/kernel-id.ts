import { InvalidKernelIdError } from './errors.js';

/**
 * What a kernel id may be: letters, digits, `-` and `_`, 1 to 128 of them (jupyter_server's ids are UUIDs, Enterprise
 * Gateway's too). Nothing else goes into a URL path: `.` and `..` would walk up it, `/` and `%` would leave it.
 */
export const KERNEL_ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;

/** True when `id` is a plain kernel id (see `KERNEL_ID_PATTERN`). */
export function isKernelId(id: unknown): id is string {
  return typeof id === 'string' && KERNEL_ID_PATTERN.test(id);
}

/** `id` when it is a plain kernel id; `InvalidKernelIdError` otherwise, saying what `subject` refused. */
export function checkedKernelId(id: unknown, subject: string): string {
  if (isKernelId(id)) return id;
  const shown = clip(typeof id === 'string' ? JSON.stringify(id) : String(typeof id));
  throw new InvalidKernelIdError(
    `${subject} refused kernel id ${shown}: a kernel id is 1 to 128 letters, digits, "-" or "_"`,
    { kernelId: shown },
  );
}

function clip(text: string): string {
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}
