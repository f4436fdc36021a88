/** The environment variable every process of a LocalGateway kernel carries: `<server instance>:<kernel id>`. */
export const KERNEL_MARKER_ENV = 'KERNELWARDEN_KERNEL';

/**
 * The environment variable naming a LocalGateway kernel's own ipc directory: a sandbox launcher binds that directory
 * (and nothing else of the ipc base) into the sandbox, so an isolated kernel's sockets are reachable by the server.
 */
export const KERNEL_IPC_DIR_ENV = 'KERNELWARDEN_KERNEL_IPC_DIR';

/** Longest ipc base directory: `<base>/<36-char kernel id>/k-<port>` must fit a Unix socket path (107 bytes). */
export const MAX_IPC_BASE_LENGTH = 64;

/** Where the kernel launch settings of one server run put things. */
export interface KernelLaunchSettings {
  /** Random id of this server run; part of every kernel's marker. */
  instance: string;
  /** Private (0700) directory holding one directory of ZMQ ipc sockets per kernel. */
  ipcDir: string;
  /** Private (0700) directory holding one stdout/stderr log per kernel (`<kernel id>.log`). */
  kernelLogDir: string;
}

function pythonString(value: string): string {
  return JSON.stringify(value);
}

/**
 * The part of LocalGateway's `jupyter_server_config.py` that decides how its kernels are launched:
 *
 * - **ZMQ over ipc, never TCP.** A kernel's channels are Unix sockets in a directory of its own under the private
 *   `ipcDir` (0700), so no other local user — and no isolated kernel, which sees only its own directory — can
 *   connect to them (iopub needs no key: over TCP on 127.0.0.1 anyone could read every cell's code and output).
 * - **Each kernel's stdout and stderr go to a log of its own** (`<kernelLogDir>/<kernel id>.log`), never to the
 *   server's log: a kernel can neither read nor forge the server's records through the descriptors it inherits.
 * - **Every process a kernel starts carries a marker** (`KERNELWARDEN_KERNEL=<instance>:<kernel id>` in its
 *   environment); when the server cleans a kernel up (shutdown, kill, restart, death) it kills every process still
 *   carrying that kernel's marker, so descendants that left the kernel's session (`start_new_session=True`, daemons)
 *   do not outlive it.
 *
 * It patches jupyter_client's `LocalProvisioner` (present in jupyter_client 7 and 8) inside the server process.
 */
export function kernelLaunchConfig(settings: KernelLaunchSettings): string {
  return `
# Kernel launch (kernelwarden LocalGateway): ipc transport in per-kernel private directories, a log per kernel,
# and no kernel descendant outliving its kernel.
import os as _kw_os
import signal as _kw_signal
import shutil as _kw_shutil
import jupyter_client.provisioning.local_provisioner as _kw_local

_KW_INSTANCE = ${pythonString(settings.instance)}
_KW_IPC_DIR = ${pythonString(settings.ipcDir)}
_KW_LOG_DIR = ${pythonString(settings.kernelLogDir)}
_KW_MARKER = ${pythonString(KERNEL_MARKER_ENV)}
_KW_IPC_ENV = ${pythonString(KERNEL_IPC_DIR_ENV)}

c.KernelManager.transport = "ipc"


def _kw_safe_id(kernel_id):
    return bool(kernel_id) and all(ch.isalnum() or ch == "-" for ch in kernel_id) and len(kernel_id) <= 64


def _kw_marked_pids(value):
    needle = (_KW_MARKER + "=" + value).encode()
    own = _kw_os.getpid()
    found = []
    for entry in _kw_os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == own:
            continue
        try:
            with open("/proc/" + entry + "/environ", "rb") as handle:
                variables = handle.read().split(b"\\0")
        except OSError:
            continue
        if needle in variables:
            found.append(int(entry))
    return found


def _kw_kill_marked(value):
    for _ in range(10):
        pids = _kw_marked_pids(value)
        if not pids:
            return
        for pid in pids:
            try:
                _kw_os.kill(pid, _kw_signal.SIGKILL)
            except OSError:
                pass


if not getattr(_kw_local.LocalProvisioner, "_kernelwarden_patched", False):
    _kw_pre_launch = _kw_local.LocalProvisioner.pre_launch
    _kw_launch_kernel = _kw_local.LocalProvisioner.launch_kernel
    _kw_cleanup = _kw_local.LocalProvisioner.cleanup

    async def _kw_patched_pre_launch(self, **kwargs):
        km = self.parent
        if km is not None and km.transport == "ipc" and _kw_safe_id(self.kernel_id):
            directory = _kw_os.path.join(_KW_IPC_DIR, self.kernel_id)
            _kw_os.makedirs(directory, mode=0o700, exist_ok=True)
            km.ip = _kw_os.path.join(directory, "k")
        return await _kw_pre_launch(self, **kwargs)

    async def _kw_patched_launch_kernel(self, cmd, **kwargs):
        if not _kw_safe_id(self.kernel_id):
            return await _kw_launch_kernel(self, cmd, **kwargs)
        env = dict(kwargs.get("env") or _kw_os.environ)
        env[_KW_MARKER] = _KW_INSTANCE + ":" + self.kernel_id
        km = self.parent
        if km is not None and km.transport == "ipc":
            env[_KW_IPC_ENV] = _kw_os.path.dirname(km.ip)
        kwargs["env"] = env
        if kwargs.get("stdout") is not None or kwargs.get("stderr") is not None:
            return await _kw_launch_kernel(self, cmd, **kwargs)
        log = _kw_os.open(
            _kw_os.path.join(_KW_LOG_DIR, self.kernel_id + ".log"),
            _kw_os.O_WRONLY | _kw_os.O_CREAT | _kw_os.O_APPEND | getattr(_kw_os, "O_CLOEXEC", 0),
            0o600,
        )
        try:
            kwargs["stdout"] = log
            kwargs["stderr"] = log
            return await _kw_launch_kernel(self, cmd, **kwargs)
        finally:
            _kw_os.close(log)

    async def _kw_patched_cleanup(self, restart=False):
        try:
            await _kw_cleanup(self, restart=restart)
        finally:
            if _kw_safe_id(self.kernel_id):
                _kw_kill_marked(_KW_INSTANCE + ":" + self.kernel_id)
                if not restart:
                    _kw_shutil.rmtree(_kw_os.path.join(_KW_IPC_DIR, self.kernel_id), ignore_errors=True)

    _kw_local.LocalProvisioner.pre_launch = _kw_patched_pre_launch
    _kw_local.LocalProvisioner.launch_kernel = _kw_patched_launch_kernel
    _kw_local.LocalProvisioner.cleanup = _kw_patched_cleanup
    _kw_local.LocalProvisioner._kernelwarden_patched = True
`;
}
