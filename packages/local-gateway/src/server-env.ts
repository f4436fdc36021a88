/**
 * Variables of the starting process that LocalGateway's server — and so every kernel it launches, for whichever
 * process — inherits: the user's identity, locale, time zone and search path, nothing that could hold a secret.
 * Everything else (cloud credentials, API keys, `KERNELWARDEN_GATEWAY_TOKEN`, `JUPYTER_TOKEN`, …) stays with the
 * starting process: a kernel gets the variables its own requesting process passes (GatewayKernel's `env`).
 */
export const SERVER_ENV_ALLOWED: readonly string[] = Object.freeze([
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'LANG',
  'LANGUAGE',
  'TZ',
  'TMPDIR',
  // Where jupyter looks for its own configuration and data: locations, not secrets.
  'JUPYTER_CONFIG_PATH',
  'JUPYTER_DATA_DIR',
  'JUPYTER_PLATFORM_DIRS',
  'JUPYTER_PREFER_ENV_PATH',
]);

/** `LC_*` locale variables are inherited as well. */
const LOCALE = /^LC_[A-Z_]+$/;

/**
 * The server's environment: the allowed variables of `from`, then `set` (jupyter's own paths, which LocalGateway
 * chooses). Nothing else of `from` gets through.
 */
export function serverEnvironment(
  from: NodeJS.ProcessEnv,
  set: Readonly<Record<string, string>>,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(from)) {
    if (value === undefined) continue;
    if (SERVER_ENV_ALLOWED.includes(name) || LOCALE.test(name)) env[name] = value;
  }
  const out: Record<string, string> = { ...env, ...set };
  if (out.PATH !== undefined) out.PATH = absolutePathEntries(out.PATH);
  return out;
}

/**
 * `PATH` without its empty and relative entries (`PATH=:$PATH`, `.`, `bin`): those name whatever directory a command
 * runs in — for a sandboxed kernel, its workspace — so a program its workspace holds would run at launch in place of
 * the interpreter (or a tool R's start script calls).
 */
function absolutePathEntries(path: string): string {
  return path
    .split(':')
    .filter((dir) => dir.startsWith('/'))
    .join(':');
}
