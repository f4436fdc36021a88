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
  /**
   * Written (with `instance`) once the server has run the whole configuration: a server that failed to load it
   * would launch kernels without any of the above, so LocalGateway refuses one that did not write it.
   */
  loadedMarker: string;
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
 * - **An IPython kernel's iopub never drops output.** Its PUB socket gets ZMQ's default send high-water mark of
 *   1,000 messages: when the server's reader falls behind (a loaded machine, a cell printing with `flush=True`),
 *   messages past the mark vanish silently on the kernel's side. `python -m ipykernel_launcher …` is launched as
 *   `python -c <boot> …`, where the boot makes the kernel's PUB/XPUB sockets unbounded before it binds them, then
 *   runs `ipykernel_launcher` as `-m` would. The backlog waits in the kernel's memory, bounded by what it prints.
 * - **Nothing in a kernel's working directory runs at its launch.** The IPython boot runs with `PYTHONSAFEPATH=1`
 *   (taken out of the environment again once it runs, so the kernel's own subprocesses behave as usual): no import of
 *   the kernel's start-up comes from the working directory (a workspace's `zmq.py`); the directory goes on `sys.path`
 *   once the kernel is initialised, where IPython puts it, so cells import from it as in any IPython kernel. Every R
 *   kernel (an argv running `IRkernel::main()`) starts with `--no-init-file --no-environ --no-restore`: no
 *   `.Rprofile`, `.Renviron` or `.RData` of the working directory (or of the user) is read.
 * - **ipykernel's fork-output pipe is out of other users' reach.** The PULL socket through which a forked child hands
 *   its output to the kernel is an ipc socket in the kernel's own private directory (ipykernel binds it on tcp
 *   127.0.0.1, where any local user could send it text that ends up in the running cell); a message without the
 *   pipe's random id is dropped, never printed.
 * - **Every process a kernel starts carries a marker** (`KERNELWARDEN_KERNEL=<instance>:<kernel id>` in its
 *   environment); when the server cleans a kernel up (shutdown, kill, restart, death) it kills every process still
 *   carrying that kernel's marker, so descendants that left the kernel's session (`start_new_session=True`, daemons)
 *   do not outlive it.
 *
 * - **A kernel's own cgroups go with it.** A sandbox launcher (`@kernelwarden/isolation`'s, for limits) makes
 *   cgroups named `kw-<tag>-<kernel id>` beside the server's; when the server cleans the kernel up for good they are
 *   removed (after its processes were killed, so they are empty).
 *
 * - **A kernel's shutdown is noticed at once.** jupyter_client waits for a kernel's process to exit by polling it
 *   every 100 ms, so every shutdown (a DELETE, a restart) took up to 100 ms past the kernel's own exit; the poll of
 *   LocalGateway's server runs every 10 ms (`KernelManager._async_wait`, where it exists).
 *
 * - **A shutdown does not wait for the interpreter's exit.** A DELETE returns once the kernel was asked to shut down
 *   (after its interrupt, as jupyter does); the server waits for the process to exit in the background (SIGTERM,
 *   then SIGKILL after its shutdown wait time, as before) and cleans it up then (marker sweep, ipc directory,
 *   cgroups). Restarts wait as before, and the server's own stop waits for every kernel, retiring ones included.
 *
 * - **No settling sleep.** jupyter_client's wrapper of a kernel's start and shutdown sleeps 10 ms at its end (for
 *   its own tests); the server runs the same wrapper without it.
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
import time as _kw_time
import jupyter_client.provisioning.local_provisioner as _kw_local

_KW_INSTANCE = ${pythonString(settings.instance)}
_KW_IPC_DIR = ${pythonString(settings.ipcDir)}
_KW_LOG_DIR = ${pythonString(settings.kernelLogDir)}
_KW_MARKER = ${pythonString(KERNEL_MARKER_ENV)}
_KW_IPC_ENV = ${pythonString(KERNEL_IPC_DIR_ENV)}

c.KernelManager.transport = "ipc"

# Run as "python -c <this> ...args" in place of "python -m ipykernel_launcher ...args", with PYTHONSAFEPATH=1 for
# the launch: nothing the kernel imports while it starts comes from its working directory (a workspace's zmq.py or
# tornado.py). The boot takes PYTHONSAFEPATH out of the environment again (unless the kernel's requester set it), and
# the working directory goes on sys.path once the kernel is initialised, where IPython puts it: cells import from
# it as in any IPython kernel. Python older than 3.11 ignores PYTHONSAFEPATH; the boot's first line does the same.
# ipykernel's fork-output pipe (the PULL socket a forked child sends its output through, on tcp 127.0.0.1 where any
# local user could reach it) is an ipc socket in the kernel's own private directory instead; a message without the
# pipe's random id is dropped, never printed into the running cell.
_KW_IPYKERNEL_BOOT = r'''
import sys
if sys.path and sys.path[0] in ("", "."):
    del sys.path[0]
import os
if _kw_drop_safepath:
    os.environ.pop("PYTHONSAFEPATH", None)
import runpy, stat, zmq
from zmq.eventloop.zmqstream import ZMQStream as _kw_Stream
_kw_socket = zmq.Context.socket
def _kw_unbounded(self, kind, *args, **kwargs):
    sock = _kw_socket(self, kind, *args, **kwargs)
    if kind in (zmq.PUB, zmq.XPUB):
        sock.setsockopt(zmq.SNDHWM, 0)
    return sock
zmq.Context.socket = _kw_unbounded
from ipykernel import iostream as _kw_io, kernelapp as _kw_app
_kw_pipe_dir = os.environ.get("KERNELWARDEN_KERNEL_IPC_DIR", "")
def _kw_private_dir(path):
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077
def _kw_setup_pipe_in(self):
    self._pipe_uuid = os.urandom(16)
    if not _kw_private_dir(_kw_pipe_dir):
        self._pipe_flag = False
        return
    self._kw_pipe_url = "ipc://" + os.path.join(_kw_pipe_dir, "f%x" % os.getpid())
    pipe_in = self.socket.context.socket(zmq.PULL)
    pipe_in.linger = 0
    try:
        pipe_in.bind(self._kw_pipe_url)
    except zmq.ZMQError:
        self._pipe_flag = False
        pipe_in.close()
        return
    self._pipe_in = _kw_Stream(pipe_in, self.io_loop)
    self._pipe_in.on_recv(self._handle_pipe_msg)
def _kw_setup_pipe_out(self):
    ctx = zmq.Context()
    pipe_out = ctx.socket(zmq.PUSH)
    pipe_out.linger = 3000
    pipe_out.connect(self._kw_pipe_url)
    return ctx, pipe_out
def _kw_handle_pipe_msg(self, msg):
    if self._pipe_flag and self._is_master_process() and msg and msg[0] == self._pipe_uuid:
        self.send_multipart(msg[1:])
_kw_io.IOPubThread._setup_pipe_in = _kw_setup_pipe_in
_kw_io.IOPubThread._setup_pipe_out = _kw_setup_pipe_out
_kw_io.IOPubThread._handle_pipe_msg = _kw_handle_pipe_msg
_kw_initialize = _kw_app.IPKernelApp.initialize
def _kw_initialize_then_cwd(self, argv=None):
    _kw_initialize(self, argv)
    if "" in sys.path or getattr(self, "ignore_cwd", False):
        return
    at = [i for i, p in enumerate(sys.path) if os.path.basename(p) in ("site-packages", "dist-packages")]
    sys.path.insert(at[0] if at else 0, "")
_kw_app.IPKernelApp.init_path = lambda self: None
_kw_app.IPKernelApp.initialize = _kw_initialize_then_cwd
runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
'''

# Every R kernel starts without reading its working directory's (or the user's) .Rprofile, .Renviron and .RData:
# a workspace's files would otherwise run before any cell, in a kernel of any policy.
_KW_R_SAFE_FLAGS = ("--no-init-file", "--no-environ", "--no-restore")


def _kw_boot_ipykernel(cmd, drop_safepath):
    out = list(cmd)
    for i in range(len(out) - 1):
        if out[i] == "-m" and out[i + 1] == "ipykernel_launcher":
            out[i : i + 2] = ["-c", "_kw_drop_safepath = %r\\n%s" % (drop_safepath, _KW_IPYKERNEL_BOOT)]
            return out, True
    return out, False


def _kw_safe_r(cmd):
    out = list(cmd)
    for j, arg in enumerate(out):
        if "IRkernel::main" not in arg:
            continue
        for k in range(j - 1, -1, -1):
            if _kw_os.path.basename(out[k]) == "R":
                out[k + 1 : k + 1] = [flag for flag in _KW_R_SAFE_FLAGS if flag not in out[k + 1 : j]]
                break
        break
    return out


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


def _kw_remove_kernel_cgroups(kernel_id):
    # A sandbox launcher gives a kernel cgroups of its own named kw-<tag>-<kernel id> beside the server's: once the
    # kernel's processes are gone they are empty, and are removed here rather than left for a later launch.
    suffix = "-" + kernel_id
    try:
        with open("/proc/self/cgroup") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        controllers = parts[1].split(",") if parts[1] else []
        mounts = ["/sys/fs/cgroup/" + c for c in controllers if c and not c.startswith("name=")] or ["/sys/fs/cgroup"]
        for mount in mounts:
            for base in {mount + parts[2], _kw_os.path.dirname(mount + parts[2].rstrip("/"))}:
                try:
                    names = _kw_os.listdir(base)
                except OSError:
                    continue
                for name in names:
                    if not (name.startswith("kw-") and name.endswith(suffix)):
                        continue
                    directory = _kw_os.path.join(base, name)
                    for _ in range(10):
                        try:
                            for leaf in _kw_os.listdir(directory):
                                if _kw_os.path.isdir(_kw_os.path.join(directory, leaf)):
                                    _kw_os.rmdir(_kw_os.path.join(directory, leaf))
                            _kw_os.rmdir(directory)
                            break
                        except OSError:
                            _kw_time.sleep(0.02)


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
        if km is not None and _kw_safe_id(self.kernel_id):
            # Forced here, at each launch, whatever a configuration loaded after this one set.
            km.transport = "ipc"
            directory = _kw_os.path.join(_KW_IPC_DIR, self.kernel_id)
            _kw_os.makedirs(directory, mode=0o700, exist_ok=True)
            km.ip = _kw_os.path.join(directory, "k")
        return await _kw_pre_launch(self, **kwargs)

    async def _kw_patched_launch_kernel(self, cmd, **kwargs):
        env = dict(kwargs.get("env") or _kw_os.environ)
        cmd, booted = _kw_boot_ipykernel(_kw_safe_r(cmd), "PYTHONSAFEPATH" not in env)
        if booted:
            env.setdefault("PYTHONSAFEPATH", "1")
        kwargs["env"] = env
        if not _kw_safe_id(self.kernel_id):
            return await _kw_launch_kernel(self, cmd, **kwargs)
        env[_KW_MARKER] = _KW_INSTANCE + ":" + self.kernel_id
        km = self.parent
        if km is not None and km.transport == "ipc":
            env[_KW_IPC_ENV] = _kw_os.path.dirname(km.ip)
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
                    _kw_remove_kernel_cgroups(self.kernel_id)

    _kw_local.LocalProvisioner.pre_launch = _kw_patched_pre_launch
    _kw_local.LocalProvisioner.launch_kernel = _kw_patched_launch_kernel
    _kw_local.LocalProvisioner.cleanup = _kw_patched_cleanup
    _kw_local.LocalProvisioner._kernelwarden_patched = True

# A kernel's exit is polled every 10 ms instead of 100 ms: a shutdown returns as soon as the kernel is gone.
import jupyter_client.manager as _kw_manager

if hasattr(_kw_manager.KernelManager, "_async_wait") and not getattr(
    _kw_manager.KernelManager, "_kernelwarden_wait_patched", False
):
    _kw_async_wait = _kw_manager.KernelManager._async_wait

    async def _kw_patched_async_wait(self, pollinterval=0.1):
        return await _kw_async_wait(self, pollinterval=min(pollinterval, 0.01))

    _kw_manager.KernelManager._async_wait = _kw_patched_async_wait
    _kw_manager.KernelManager._kernelwarden_wait_patched = True

# A shutdown (DELETE) returns once the kernel was asked to shut down: the server waits for its exit behind (killing it
# after the shutdown wait time, as before) and then cleans it up, so a caller does not wait for the interpreter's own
# exit (about 130 ms for IPython). Restarts are unchanged; the server's own stop still waits for every kernel.
import asyncio as _kw_asyncio
import jupyter_client.multikernelmanager as _kw_multi

_kw_retiring = set()
_kw_server_stopping = False

if not getattr(_kw_manager.KernelManager, "_kernelwarden_retire_patched", False):
    _kw_finish_shutdown = _kw_manager.KernelManager._async_finish_shutdown
    _kw_cleanup_resources = _kw_manager.KernelManager._async_cleanup_resources

    async def _kw_retire(km, waittime, pollinterval):
        try:
            await _kw_finish_shutdown(km, waittime=waittime, pollinterval=pollinterval, restart=False)
        finally:
            await _kw_cleanup_resources(km, restart=False)

    async def _kw_patched_finish_shutdown(self, waittime=None, pollinterval=0.1, restart=False):
        if restart or _kw_server_stopping:
            return await _kw_finish_shutdown(self, waittime=waittime, pollinterval=pollinterval, restart=restart)
        self._kw_retired = True
        task = _kw_asyncio.ensure_future(_kw_retire(self, waittime, pollinterval))
        _kw_retiring.add(task)
        task.add_done_callback(_kw_retiring.discard)

    async def _kw_patched_cleanup_resources(self, restart=False):
        if restart or not getattr(self, "_kw_retired", False):
            return await _kw_cleanup_resources(self, restart=restart)

    _kw_shutdown_all = _kw_multi.AsyncMultiKernelManager.shutdown_all

    async def _kw_patched_shutdown_all(self, now=False):
        global _kw_server_stopping
        _kw_server_stopping = True
        await _kw_shutdown_all(self, now=now)
        if _kw_retiring:
            await _kw_asyncio.gather(*list(_kw_retiring), return_exceptions=True)

    _kw_manager.KernelManager._async_finish_shutdown = _kw_patched_finish_shutdown
    _kw_manager.KernelManager._async_cleanup_resources = _kw_patched_cleanup_resources
    _kw_manager.AsyncKernelManager.finish_shutdown = _kw_patched_finish_shutdown
    _kw_manager.AsyncKernelManager.cleanup_resources = _kw_patched_cleanup_resources
    _kw_multi.AsyncMultiKernelManager.shutdown_all = _kw_patched_shutdown_all
    _kw_manager.KernelManager._kernelwarden_retire_patched = True

# jupyter_client's "pending state" wrapper of a kernel's start and shutdown ends with a 10 ms sleep, there "so that
# tests can capture the state before done": every start, restart and shutdown of ours paid it. The same wrapper,
# without the sleep.
if not getattr(_kw_manager.KernelManager, "_kernelwarden_pending_patched", False):

    def _kw_without_settle_sleep(decorated):
        method = getattr(decorated, "__wrapped__", None)
        if method is None:
            return decorated

        async def wrapper(self, *args, **kwargs):
            if self._attempted_start or not self._ready:
                self._ready = _kw_manager._get_future()
            try:
                out = await method(self, *args, **kwargs)
                if getattr(self, "owns_kernel", True):
                    self._ready.set_result(None)
                return out
            except Exception as e:
                self._ready.set_exception(e)
                self.log.exception(self._ready.exception())
                raise e

        wrapper.__wrapped__ = method
        return wrapper

    for _kw_name, _kw_alias in (("_async_start_kernel", "start_kernel"), ("_async_shutdown_kernel", "shutdown_kernel")):
        _kw_quick = _kw_without_settle_sleep(getattr(_kw_manager.KernelManager, _kw_name))
        setattr(_kw_manager.KernelManager, _kw_name, _kw_quick)
        setattr(_kw_manager.AsyncKernelManager, _kw_alias, _kw_quick)
    _kw_manager.KernelManager._kernelwarden_pending_patched = True

with open(${pythonString(settings.loadedMarker)}, "w") as _kw_marker_file:
    _kw_marker_file.write(_KW_INSTANCE)
`;
}
