/**
 * `PATH` without its empty and relative entries (`PATH=:$PATH`, `.`, `bin`): those name the working directory of
 * whatever runs with it — a kernel's workspace, the directory `doctor` runs in — so a program there would run in place
 * of the tool meant (R runs `rm -Rf` on its temporary directory as it exits, an unsandboxed kernel as this user).
 */
export function absolutePathEntries(path: string): string {
  return path
    .split(':')
    .filter((dir) => dir.startsWith('/'))
    .join(':');
}
