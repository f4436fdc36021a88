import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LocalGatewayError } from './errors.js';
import type { GatewayLayout } from './layout.js';
import type { LauncherMode } from './options.js';
import { READY_WAIT_MS, type StartCapacitySettings } from './start-capacity.js';
import { ensurePrivateDir, writePrivateFileAtomic } from './state-dir.js';

/** The Python package the embedded server loads: settings, kernel launch, start capacity, lifecycle. */
export const PYTHON_PACKAGE = 'kernelwarden_gateway';

/**
 * Where this npm package ships the Python package: `python/kernelwarden_gateway/` beside `dist/` (and beside `src/`
 * when run from the sources). Bundled into an application's single file, this module finds it in the installed
 * package instead (the application depends on `@kernelwarden/local-gateway`, so its location resolves it).
 */
export function shippedPythonPackageDir(): string {
  const here = import.meta.url;
  const beside = fileURLToPath(new URL(`../python/${PYTHON_PACKAGE}`, here));
  if (existsSync(join(beside, '__init__.py'))) return beside;
  try {
    const manifest = createRequire(here).resolve('@kernelwarden/local-gateway/package.json');
    const installed = join(dirname(manifest), 'python', PYTHON_PACKAGE);
    if (existsSync(join(installed, '__init__.py'))) return installed;
  } catch {
    // not installed where this bundle is
  }
  return beside;
}

/** The settings the server's config passes to `kernelwarden_gateway.configure()`. */
export interface ServerPythonSettings extends StartCapacitySettings {
  /** Random id of this server run; part of every kernel's marker. */
  instance: string;
  /** Private (0700) directory holding one directory of ZMQ ipc sockets per kernel. */
  ipcDir: string;
  /** Private (0700) directory holding one stdout/stderr log per kernel (`<kernel id>.log`). */
  kernelLogDir: string;
  /** Written (with `instance`) once the server has run the whole configuration and loaded its extension. */
  loadedMarker: string;
  /** Whether the server keeps kernel journals, and their bounds. */
  journal: Readonly<{ enabled: boolean; maxBytes: number; maxAgeMs: number }>;
  /** How Python kernels start. */
  launcher: LauncherMode;
  /** Modules the kernel launchers preload. */
  launcherPreload: readonly string[];
  /** Where the server says which launchers run and how each kernel started (`launchers.json`). */
  launcherStatusFile: string;
}

/**
 * Copies the shipped Python package into `<state dir>/python/kernelwarden_gateway/` (0700 directories, 0600 files,
 * the previous copy and its byte code removed first): the server imports it only from there, a directory no other
 * user can write (the state directory's checks), and a server keeps the code it started with whatever happens to the
 * npm package later.
 */
export function installPythonPackage(layout: GatewayLayout, from = shippedPythonPackageDir()): void {
  let names: string[];
  try {
    names = readdirSync(from).filter((name) => name.endsWith('.py'));
  } catch (error) {
    throw new LocalGatewayError(
      `The local gateway's Python package is missing from ${from} (${(error as Error).message}): reinstall @kernelwarden/local-gateway, or, when bundling it into an application, install @kernelwarden/local-gateway beside the bundle (its python/${PYTHON_PACKAGE} is what its jupyter-server loads)`,
      { code: 'LOCAL_GATEWAY_CONFIG' },
    );
  }
  if (!names.includes('__init__.py')) {
    throw new LocalGatewayError(
      `The local gateway's Python package in ${from} has no __init__.py: reinstall @kernelwarden/local-gateway`,
      { code: 'LOCAL_GATEWAY_CONFIG' },
    );
  }
  const target = join(layout.python, PYTHON_PACKAGE);
  rmSync(layout.python, { recursive: true, force: true });
  ensurePrivateDir(layout.python);
  ensurePrivateDir(target);
  for (const name of names) writePrivateFileAtomic(join(target, name), readFileSync(join(from, name), 'utf8'));
}

function pythonString(value: string): string {
  return JSON.stringify(value);
}

/**
 * The `jupyter_server_config.py` of the embedded server: it puts the private copy of the Python package first on the
 * server's `sys.path` and hands it this run's settings.
 */
export function serverConfigFile(layout: GatewayLayout, settings: ServerPythonSettings): string {
  const values = {
    instance: settings.instance,
    ipc_dir: settings.ipcDir,
    kernel_log_dir: settings.kernelLogDir,
    loaded_marker: settings.loadedMarker,
    max_concurrent_starts: Math.max(1, Math.floor(settings.maxConcurrentStarts)),
    max_kernels: Math.max(1, Math.floor(settings.maxKernels)),
    start_queue_timeout_s: settings.startQueueTimeoutMs / 1000,
    ready_wait_s: READY_WAIT_MS / 1000,
    journal_enabled: settings.journal.enabled,
    journal_max_bytes: settings.journal.maxBytes,
    journal_max_age_s: settings.journal.maxAgeMs / 1000,
    launcher: settings.launcher,
    launcher_preload: settings.launcherPreload,
    launcher_status_file: settings.launcherStatusFile,
  };
  return `# Written by kernelwarden's LocalGateway at every start; edits are overwritten.
import json
import sys

sys.path.insert(0, ${pythonString(layout.python)})
import ${PYTHON_PACKAGE}  # noqa: E402

${PYTHON_PACKAGE}.configure(get_config(), json.loads(${pythonString(JSON.stringify(values))}))  # noqa: F821
`;
}
