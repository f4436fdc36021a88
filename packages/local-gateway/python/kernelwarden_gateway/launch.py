"""How the embedded server launches and cleans up its kernels (patches of jupyter_client's LocalProvisioner).

- ZMQ over ipc, never TCP: a kernel's channels are Unix sockets in a directory of its own under the private (0700)
  ipc directory, so no other local user - and no isolated kernel, which sees only its own directory - can connect to
  them (iopub needs no key: over TCP on 127.0.0.1 anyone could read every cell's code and output).
- Each kernel's stdout and stderr go to a log of its own (<kernel log dir>/<kernel id>.log), never to the server's.
- IPython kernels boot through ipykernel_boot.py (unbounded iopub, PYTHONSAFEPATH for the launch, a private
  fork-output pipe); every R kernel starts with --no-init-file --no-environ --no-restore.
- A command `<absolute python> -c <boot> ...` is forked from that interpreter's launcher (fork_launch.py) unless
  forking is off or the launcher cannot serve it (then exec'd, the reason logged): same log, marker, ipc directory.
- Every process a kernel starts carries a marker (KERNELWARDEN_KERNEL=<instance>:<kernel id>); when the server cleans
  a kernel up (shutdown, kill, restart, death) it kills every process still carrying it, and removes the kernel's own
  cgroups (kw-<tag>-<kernel id>) once it is gone for good.
"""

import asyncio
import os
import shutil
import signal
import time

import jupyter_client.provisioning.local_provisioner as _local

from . import fork_launch

MARKER_ENV = "KERNELWARDEN_KERNEL"
IPC_DIR_ENV = "KERNELWARDEN_KERNEL_IPC_DIR"

# Every R kernel starts without reading its working directory's (or the user's) .Rprofile, .Renviron and .RData:
# a workspace's files would otherwise run before any cell, in a kernel of any policy.
R_SAFE_FLAGS = ("--no-init-file", "--no-environ", "--no-restore")

_BOOT_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ipykernel_boot.py")


class Settings:
    """Where the kernels of one server run put things."""

    def __init__(self, instance, ipc_dir, kernel_log_dir):
        self.instance = instance
        self.ipc_dir = ipc_dir
        self.kernel_log_dir = kernel_log_dir


_settings = None
_boot = None


def boot_text():
    """The text of ipykernel_boot.py, read once."""
    global _boot
    if _boot is None:
        with open(_BOOT_FILE, encoding="utf-8") as handle:
            _boot = handle.read()
    return _boot


def boot_ipykernel(cmd, drop_safepath):
    """`cmd` with `-m ipykernel_launcher` replaced by `-c <boot>`, and whether it was there."""
    out = list(cmd)
    for i in range(len(out) - 1):
        if out[i] == "-m" and out[i + 1] == "ipykernel_launcher":
            out[i : i + 2] = ["-c", "_kw_drop_safepath = %r\n%s" % (drop_safepath, boot_text())]
            return out, True
    return out, False


def safe_r(cmd):
    """`cmd` with R's safe flags right after the R executable, when it runs IRkernel::main()."""
    out = list(cmd)
    for j, arg in enumerate(out):
        if "IRkernel::main" not in arg:
            continue
        for k in range(j - 1, -1, -1):
            if os.path.basename(out[k]) == "R":
                out[k + 1 : k + 1] = [flag for flag in R_SAFE_FLAGS if flag not in out[k + 1 : j]]
                break
        break
    return out


def safe_id(kernel_id):
    """Whether a kernel id may name a directory and a marker: letters, digits and dashes, at most 64."""
    return bool(kernel_id) and all(ch.isalnum() or ch == "-" for ch in kernel_id) and len(kernel_id) <= 64


def marked_pids(value, proc="/proc"):
    """The processes (but this one) whose environment holds KERNELWARDEN_KERNEL=<value>."""
    needle = (MARKER_ENV + "=" + value).encode()
    own = os.getpid()
    found = []
    for entry in os.listdir(proc):
        if not entry.isdigit() or int(entry) == own:
            continue
        try:
            with open(os.path.join(proc, entry, "environ"), "rb") as handle:
                variables = handle.read().split(b"\0")
        except OSError:
            continue
        if needle in variables:
            found.append(int(entry))
    return found


def kill_marked(value):
    """Kills (SIGKILL) every process carrying the marker, looking again until none is left (10 rounds at most)."""
    for _ in range(10):
        pids = marked_pids(value)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def remove_kernel_cgroups(kernel_id, cgroup_file="/proc/self/cgroup", root="/sys/fs/cgroup"):
    """Removes the (empty) cgroups kw-<tag>-<kernel id> a sandbox launcher made beside the server's."""
    suffix = "-" + kernel_id
    try:
        with open(cgroup_file) as handle:
            lines = handle.read().splitlines()
    except OSError:
        return
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        controllers = parts[1].split(",") if parts[1] else []
        mounts = [root + "/" + c for c in controllers if c and not c.startswith("name=")] or [root]
        for mount in mounts:
            for base in {mount + parts[2], os.path.dirname(mount + parts[2].rstrip("/"))}:
                try:
                    names = os.listdir(base)
                except OSError:
                    continue
                for name in names:
                    if not (name.startswith("kw-") and name.endswith(suffix)):
                        continue
                    directory = os.path.join(base, name)
                    for _ in range(10):
                        try:
                            for leaf in os.listdir(directory):
                                if os.path.isdir(os.path.join(directory, leaf)):
                                    os.rmdir(os.path.join(directory, leaf))
                            os.rmdir(directory)
                            break
                        except OSError:
                            time.sleep(0.02)


def launch_command(cmd, env):
    """The command and environment a kernel is launched with: the IPython boot, R's safe flags, PYTHONSAFEPATH."""
    env = dict(env)
    cmd, booted = boot_ipykernel(safe_r(cmd), "PYTHONSAFEPATH" not in env)
    if booted:
        env.setdefault("PYTHONSAFEPATH", "1")
    return cmd, env


async def _patched_pre_launch(self, **kwargs):
    km = self.parent
    if km is not None and safe_id(self.kernel_id):
        # Forced here, at each launch, whatever a configuration loaded after this one set.
        km.transport = "ipc"
        directory = os.path.join(_settings.ipc_dir, self.kernel_id)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        km.ip = os.path.join(directory, "k")
    return await _original["pre_launch"](self, **kwargs)


async def _patched_launch_kernel(self, cmd, **kwargs):
    cmd, env = launch_command(cmd, kwargs.get("env") or os.environ)
    kwargs["env"] = env
    launch = _original["launch_kernel"]
    if not safe_id(self.kernel_id):
        return await launch(self, cmd, **kwargs)
    env[MARKER_ENV] = _settings.instance + ":" + self.kernel_id
    km = self.parent
    if km is not None and km.transport == "ipc":
        env[IPC_DIR_ENV] = os.path.dirname(km.ip)
    if kwargs.get("stdout") is not None or kwargs.get("stderr") is not None:
        return await launch(self, cmd, **kwargs)
    log = os.open(
        os.path.join(_settings.kernel_log_dir, self.kernel_id + ".log"),
        os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0),
        0o600,
    )
    try:
        kwargs["stdout"] = log
        kwargs["stderr"] = log
        forked = await _fork(self, cmd, kwargs, log)
        if forked is not None:
            return forked
        return await launch(self, cmd, **kwargs)
    finally:
        os.close(log)


# The keyword arguments of a launch a fork reproduces (the others are exec'd).
_FORKABLE_KWARGS = {"env", "cwd", "stdout", "stderr", "independent", "extra_arguments", "kernel_id"}


def _note(kernel_id, cmd, how, reason=None):
    python = fork_launch.kernel_interpreter(cmd)
    entry = {"launch": how}
    if python is not None:
        entry["python"] = python
        version = fork_launch.ipykernel_of(os.path.normpath(python))
        if version:
            entry["ipykernel"] = version
    if reason:
        entry["reason"] = reason
    fork_launch.record(kernel_id, entry)


async def _fork(self, cmd, kwargs, log):
    """The kernel forked from its interpreter's launcher (fork_launch), or None: exec it (the reason is logged)."""
    python = fork_launch.forkable_interpreter(cmd)
    if fork_launch.mode() != "fork" or python is None:
        _note(self.kernel_id, cmd, "exec", "forking is off" if python is not None else None)
        return None
    extra = sorted(set(kwargs) - _FORKABLE_KWARGS)
    if extra or kwargs.get("independent"):
        _note(self.kernel_id, cmd, "exec", "launch arguments %s" % (extra or ["independent"]))
        return None
    env = dict(kwargs["env"])
    env["JPY_PARENT_PID"] = str(os.getpid())
    cwd = os.fspath(kwargs.get("cwd") or os.getcwd())
    argv = [os.path.expanduser(arg) for arg in cmd]
    try:
        process, _ = await asyncio.get_running_loop().run_in_executor(
            None, fork_launch.fork, python, argv, env, cwd, log
        )
    except fork_launch.LauncherUnavailable as error:
        self.log.warning("kernelwarden: kernel %s is exec'd, not forked: %s", self.kernel_id, error)
        _note(self.kernel_id, cmd, "exec", str(error))
        return None
    self.process = process
    self.pid = process.pid
    self.pgid = process.pid  # the kernel's own session, as start_new_session gives an exec'd one
    self.cwd = kwargs.get("cwd") or os.getcwd()
    _note(self.kernel_id, cmd, "fork")
    return self.connection_info


async def _patched_cleanup(self, restart=False):
    try:
        await _original["cleanup"](self, restart=restart)
    finally:
        if safe_id(self.kernel_id):
            kill_marked(_settings.instance + ":" + self.kernel_id)
            if not restart:
                shutil.rmtree(os.path.join(_settings.ipc_dir, self.kernel_id), ignore_errors=True)
                remove_kernel_cgroups(self.kernel_id)
                fork_launch.record(self.kernel_id, None)


_original = {}


def install(settings, c):
    """Applies the launch settings to the server's config `c` and patches LocalProvisioner (once per process)."""
    global _settings
    _settings = settings
    c.KernelManager.transport = "ipc"
    provisioner = _local.LocalProvisioner
    if getattr(provisioner, "_kernelwarden_patched", False):
        return
    _original["pre_launch"] = provisioner.pre_launch
    _original["launch_kernel"] = provisioner.launch_kernel
    _original["cleanup"] = provisioner.cleanup
    provisioner.pre_launch = _patched_pre_launch
    provisioner.launch_kernel = _patched_launch_kernel
    provisioner.cleanup = _patched_cleanup
    provisioner._kernelwarden_patched = True
