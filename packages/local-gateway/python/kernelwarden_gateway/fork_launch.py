"""Fast starts: Python kernels forked from a launcher that has already imported the kernel machinery.

- A launcher (forkserver.py) per interpreter: the server's own is started with the server, another interpreter's (a
  `kw-py-<hash>` kernelspec's virtual environment) at its first kernel. It imports ipykernel, IPython, zmq and
  tornado (and the `launcher_preload` modules), then forks each kernel whose command is `<that interpreter> -c <boot>`
  (the IPython boot launch.py makes of `-m ipykernel_launcher`). Any other command - an isolated kernelspec's
  sandbox, R - is exec'd.
- The server talks to a launcher over a private socket pair. A start the launcher cannot serve (dead, starting for
  longer than LAUNCHER_READY_WAIT, not fork-safe, an environment variable the interpreter reads at start-up that
  differs from the launcher's) is exec'd, with the reason in the server's log; a launcher that dies or does not
  answer is replaced (at most MAX_REPLACEMENTS times in REPLACEMENT_WINDOW seconds).
- A forked kernel is the launcher's child: the server polls, waits for, signals and kills it through ForkedProcess,
  a Popen of its own (exit statuses relayed by the launcher, the pid pinned by a pidfd).
- `<state>/launchers.json` (the `launcher_status_file` setting) says which launchers run and how each kernel
  started, for `gateway status`.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time

from traitlets.log import get_logger

from .forked_process import ForkedProcess

_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "forkserver.py")

# How long a start waits for a launcher that is still importing, and for its answer to a request.
LAUNCHER_READY_WAIT = 20.0
LAUNCHER_ANSWER_WAIT = 10.0
MAX_REPLACEMENTS = 3
# Launchers at once (each an idle interpreter of about 60 MB): past it, an idle one of another interpreter than the
# server's is stopped for a new one; with none idle, the new interpreter's kernels are exec'd.
MAX_LAUNCHERS = 4
REPLACEMENT_WINDOW = 60.0
# Padding in the launcher's environment and command line: a forked kernel writes its own over it in /proc.
ENV_ROOM = 128 * 1024
ARG_ROOM = 8 * 1024
ROOM_ENV = "KERNELWARDEN_LAUNCHER_ROOM"
ROOM_PART = 16 * 1024  # one variable may hold at most 128 KiB

# Variables the interpreter (or a library it loaded) reads when it starts: a kernel whose value differs from its
# launcher's is exec'd. PYTHONPATH is applied to the forked kernel's sys.path; PYTHONSAFEPATH is the boot's.
_STARTUP_PREFIXES = ("PYTHON", "LD_", "LC_", "OMP_", "OPENBLAS_", "MKL_", "MALLOC_", "GLIBC_")
_STARTUP_NAMES = ("LANG", "LANGUAGE", "HOME", "TMPDIR")
_STARTUP_EXEMPT = ("PYTHONPATH", "PYTHONSAFEPATH", "PYTHONBREAKPOINT", "PYTHONSTARTUP", "PYTHONINSPECT")


def startup_sensitive(name):
    """Whether the interpreter reads variable `name` at start-up (so a forked kernel could not honour it)."""
    if name in _STARTUP_EXEMPT or name.startswith(ROOM_ENV):
        return False
    return name in _STARTUP_NAMES or name.startswith(_STARTUP_PREFIXES)


def env_difference(launcher_env, kernel_env):
    """The start-up variables whose value differs between the launcher and the kernel, sorted."""
    names = {n for n in set(launcher_env) | set(kernel_env) if startup_sensitive(n)}
    return sorted(n for n in names if launcher_env.get(n) != kernel_env.get(n))


BOOT_PREFIX = "_kw_drop_safepath = "


def forkable_interpreter(cmd):
    """The interpreter of `cmd` when it is `<absolute python> -c <the IPython boot> ...` (what launch.py makes of
    `-m ipykernel_launcher`), else None: any other command (a sandbox's `/bin/sh -c`, R) is exec'd."""
    if len(cmd) >= 3 and cmd[1] == "-c" and cmd[2].startswith(BOOT_PREFIX) and os.path.isabs(cmd[0]):
        return os.path.normpath(cmd[0])
    return None


def kernel_interpreter(cmd):
    """The Python interpreter a kernel command runs (its `-m ipykernel_launcher`/`-c` boot), wherever it is in it."""
    for i in range(len(cmd) - 2):
        if cmd[i + 1] == "-m" and cmd[i + 2] == "ipykernel_launcher":
            return cmd[i]
        if cmd[i + 1] == "-c" and cmd[i + 2].startswith(BOOT_PREFIX):
            return cmd[i]
    return None


def exit_code(status):
    """A waitpid status as Popen's returncode."""
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


class LauncherUnavailable(Exception):
    """This start cannot be forked; the message says why."""


class Launcher:
    """One launcher process for one interpreter."""

    def __init__(self, python, preload, env=None):
        self.python = python
        self.preload = list(preload)
        self.state = "starting"
        self.reason = None
        self.info = {}
        self.started_at = time.time()
        self.pid = None
        self._reader = None
        self.last_used = time.monotonic()
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._answers = {}
        # Each live child's exit status holder ([None] until the launcher relays its exit). A pid is reused only once
        # the launcher reaped its previous process, whose exit comes first on the socket: no status goes astray.
        self._children = {}
        self._next = 0
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.env = dict(os.environ if env is None else env)
        self.env["PYTHONSAFEPATH"] = "1"
        launch_env = dict(self.env)
        for i in range(ENV_ROOM // ROOM_PART):
            launch_env["%s_%d" % (ROOM_ENV, i)] = "x" * ROOM_PART
        with open(_SOURCE, encoding="utf-8") as handle:
            source = handle.read()
        try:
            self.process = subprocess.Popen(
                [python, "-c", source, str(theirs.fileno()), ",".join(self.preload), "x" * ARG_ROOM],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                cwd="/",
                env=launch_env,
                start_new_session=True,
            )
        except OSError as error:
            ours.close()
            self.process = None
            self.state = "dead"
            self.reason = "could not start %s: %s" % (python, error)
            self._ready.set()
            return
        finally:
            theirs.close()
        self.pid = self.process.pid
        self._sock = ours
        self._reader = threading.Thread(target=self._read, name="kernelwarden-launcher-%d" % self.pid, daemon=True)
        self._reader.start()

    def _read(self):
        sock = self._sock
        try:
            while True:
                data = sock.recv(1 << 16)
                if not data:
                    break
                message = json.loads(data)
                op = message.get("op")
                if op in ("ready", "unsafe"):
                    self.info = message
                    if op == "unsafe":
                        self._fail("unsafe", "not fork-safe: %s" % message.get("reason"))
                    else:
                        self.state = "ready"
                    if message.get("failed"):
                        get_logger().warning(
                            "kernelwarden launcher %s: preload failed: %s", self.python, "; ".join(message["failed"])
                        )
                    self._ready.set()
                elif op in ("started", "refused"):
                    with self._lock:
                        if op == "started":
                            message["holder"] = self._children[message["pid"]] = [None]
                        slot = self._answers.get(message["id"])
                    if slot is not None:
                        slot[1] = message
                        slot[0].set()
                elif op == "exit":
                    with self._lock:
                        holder = self._children.pop(message["pid"], None)
                    if holder is not None:
                        holder[0] = message["status"]
        except (OSError, ValueError) as error:
            self._fail("dead", "its socket failed: %s" % error)
        if self.state != "unsafe":
            code = self.process.poll() if self.process else None
            self._fail("dead", "it exited" + ("" if code is None else " (status %s)" % code))
        self._ready.set()

    def _fail(self, state, reason):
        with self._lock:
            if self.state in ("dead", "unsafe"):
                return
            self.state = state
            self.reason = reason
            answers = list(self._answers.values())
        for slot in answers:
            slot[0].set()

    def usable(self):
        return self.state in ("starting", "ready")

    @property
    def kernels(self):
        """The pids of its live children."""
        with self._lock:
            return set(self._children)

    def start(self, argv, env, cwd, log_fd):
        """Forks a kernel running `argv`: (pid, its exit status holder). LauncherUnavailable when it cannot."""
        if not self._ready.wait(LAUNCHER_READY_WAIT):
            raise LauncherUnavailable("the launcher of %s is not ready after %ss" % (self.python, LAUNCHER_READY_WAIT))
        if self.state != "ready":
            raise LauncherUnavailable("the launcher of %s is %s: %s" % (self.python, self.state, self.reason))
        different = env_difference(self.env, env)
        if different:
            raise LauncherUnavailable("start-up variables differ from the launcher's: %s" % ", ".join(different))
        slot = [threading.Event(), None]
        with self._lock:
            self._next += 1
            request_id = self._next
            self._answers[request_id] = slot
        try:
            payload = json.dumps({"id": request_id, "argv": list(argv), "env": dict(env), "cwd": cwd}).encode()
            try:
                socket.send_fds(self._sock, [payload], [log_fd])
            except OSError as error:
                self.stop()
                raise LauncherUnavailable("the launcher of %s does not take requests: %s" % (self.python, error))
            if not slot[0].wait(LAUNCHER_ANSWER_WAIT) or slot[1] is None:
                if self.state == "ready":
                    self.stop()
                    raise LauncherUnavailable(
                        "the launcher of %s did not answer in %ss (stopped)" % (self.python, LAUNCHER_ANSWER_WAIT)
                    )
                raise LauncherUnavailable("the launcher of %s is %s: %s" % (self.python, self.state, self.reason))
        finally:
            with self._lock:
                self._answers.pop(request_id, None)
        answer = slot[1]
        if answer["op"] == "refused":
            raise LauncherUnavailable("the launcher of %s refused: %s" % (self.python, answer["reason"]))
        self.last_used = time.monotonic()
        return answer["pid"], answer["holder"]

    def stop(self):
        """Kills the launcher (its kernels die with it) and closes the socket."""
        self._fail("dead", "stopped")
        if self.process is not None and self.process.poll() is None:
            try:
                self.process.kill()
                self.process.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        try:
            self._sock.close()
        except (OSError, AttributeError):
            pass

    def describe(self):
        out = {
            "python": self.python,
            "pid": self.pid,
            "state": self.state,
            "preload": self.preload,
        }
        if self.reason:
            out["reason"] = self.reason
        for key in ("ipykernel", "version", "failed"):
            if self.info.get(key):
                out[key] = self.info[key]
        return out


class Settings:
    """Whether kernels are forked, what launchers preload, where the status goes."""

    def __init__(self, mode="fork", preload=(), status_file=None):
        self.mode = mode
        self.preload = [name for name in preload if name]
        self.status_file = status_file


_settings = Settings(mode="exec")
_launchers = {}
_replacements = {}
_kernels = {}
_guard = threading.Lock()


def mode():
    """`fork` or `exec`."""
    return _settings.mode


def _log():
    return get_logger()


def write_status():
    """Writes the launchers and the kernels' launches to the status file (whole, then renamed)."""
    path = _settings.status_file
    if not path:
        return
    with _guard:
        document = {
            "mode": _settings.mode,
            "preload": _settings.preload,
            "server_python": sys.executable,
            "launchers": [launcher.describe() for launcher in _launchers.values()],
            "kernels": dict(_kernels),
        }
    temp = "%s.%d.tmp" % (path, os.getpid())
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(document, handle)
        os.replace(temp, path)
    except OSError:
        pass


def launcher_for(python, create=True):
    """The live launcher of `python`, started (or replaced) when `create`; None when forking is off for it."""
    with _guard:
        launcher = _launchers.get(python)
        if launcher is not None and launcher.usable():
            return launcher
        if launcher is not None and launcher.state == "unsafe":
            return launcher
        if not create:
            return launcher
        if launcher is None:
            _make_room(python)
        if launcher is not None:
            now = time.monotonic()
            recent = [t for t in _replacements.get(python, []) if now - t < REPLACEMENT_WINDOW]
            if len(recent) >= MAX_REPLACEMENTS:
                return launcher
            _replacements[python] = recent + [now]
            _log().warning(
                "kernelwarden: the launcher of %s is %s (%s): replacing it", python, launcher.state, launcher.reason
            )
        launcher = Launcher(python, _settings.preload)
        _launchers[python] = launcher
    threading.Thread(target=_report_when_ready, args=(launcher,), daemon=True).start()
    return launcher


def _make_room(python):
    """Stops the least recently used idle launcher when MAX_LAUNCHERS run (called with _guard held); raises
    LauncherUnavailable when every one has kernels."""
    live = [one for one in _launchers.values() if one.usable() and one.python != python]
    if len(live) < MAX_LAUNCHERS:
        return
    server_python = os.path.normpath(sys.executable)
    idle = sorted(
        (one for one in live if not one.kernels and one.python != server_python), key=lambda one: one.last_used
    )
    if not idle:
        raise LauncherUnavailable("%d launchers run, each with kernels of its own" % len(live))
    retired = idle[0]
    retired.stop()
    retired.reason = "stopped for the launcher of %s (at most %d run)" % (python, MAX_LAUNCHERS)
    del _launchers[retired.python]


def _report_when_ready(launcher):
    launcher._ready.wait(LAUNCHER_READY_WAIT * 3)
    if launcher.state != "ready":
        _log().warning("kernelwarden: the launcher of %s is %s: %s", launcher.python, launcher.state, launcher.reason)
    write_status()
    if launcher._reader is not None:
        launcher._reader.join()
        write_status()


def fork(python, argv, env, cwd, log_fd):
    """Forks `argv` from `python`'s launcher: (ForkedProcess, launcher). LauncherUnavailable says why not. A
    launcher found dead is replaced (the replacement imports while this start is exec'd)."""
    with _guard:
        previous = _launchers.get(python)
    if previous is not None and previous.state == "dead":
        replacement = launcher_for(python)
        raise LauncherUnavailable(
            "the launcher of %s is dead (%s); %s"
            % (
                python,
                previous.reason,
                "replaced"
                if replacement is not previous
                else "not replaced: it died %d times in %ds" % (MAX_REPLACEMENTS, REPLACEMENT_WINDOW),
            )
        )
    launcher = launcher_for(python)
    if not launcher.usable():
        raise LauncherUnavailable("the launcher of %s is %s: %s" % (python, launcher.state, launcher.reason))
    pid, holder = launcher.start(argv, env, cwd, log_fd)
    return ForkedProcess(launcher, pid, argv, holder), launcher


def record(kernel_id, entry):
    with _guard:
        if entry is None:
            _kernels.pop(kernel_id, None)
        else:
            _kernels[kernel_id] = entry
    write_status()


def ipykernel_of(python):
    """The ipykernel version of `python` as its launcher reported it, or None."""
    launcher = _launchers.get(python)
    return launcher.info.get("ipykernel") if launcher is not None else None


def install(settings):
    """Sets how kernels launch; starts the server interpreter's launcher at once when forking."""
    global _settings
    _settings = settings
    if settings.mode == "fork":
        launcher_for(os.path.normpath(sys.executable))
    write_status()


def stop_all():
    with _guard:
        launchers = list(_launchers.values())
    for launcher in launchers:
        launcher.stop()
