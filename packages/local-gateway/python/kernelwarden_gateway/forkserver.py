# The kernel launcher of kernelwarden's embedded jupyter-server (fork_launch.py starts it). It is run as
# `python -c <this file> <fd> <preload> <room>` with PYTHONSAFEPATH=1, never imported as a module: nothing of it is
# left in sys.modules for the kernels it forks.
#
# - It imports the kernel machinery (ipykernel, IPython, zmq, tornado) and the modules named in <preload> once, then
#   forks a kernel per request from the server (over the socket <fd>): `python -c <code> args...` run in the child as
#   the interpreter would run it. It creates no zmq Context, event loop or thread before it forks (checked at start:
#   it refuses to serve otherwise), and it imports nothing a cold kernel does not import, but the preload.
# - The child is made a cold kernel's equal: its own session (setsid), the requested cwd and environment (not the
#   launcher's), the log as stdout/stderr and a closed pipe as stdin, every inherited descriptor closed, fresh random
#   state, the requested command line and environment in /proc (<room> is padding that makes room for them), and
#   SIGKILL when the launcher dies (prctl PDEATHSIG).
# - Exit statuses of its kernels go back to the server, which polls, signals and kills them by pid (pidfd).
import sys

_kw_base_modules = set(sys.modules)
_kw_fd = int(sys.argv[1])
_kw_preload = [name for name in sys.argv[2].split(",") if name]
_kw_kernel_modules = (
    "zmq",
    "zmq.eventloop.zmqstream",
    "ipykernel.iostream",
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "ipykernel.zmqshell",
    # What a kernel's initialisation imports (traitlets resolves the debugger, completer and history classes by name
    # then): ipykernel 7 loads debugpy there, ~60 ms of a forked kernel's start. A cold kernel imports them all too.
    "ipykernel.debugger",
    "IPython.core.completerlib",
    "IPython.core.debugger",
    "IPython.core.oinspect",
    "IPython.extensions.storemagic",
    "IPython.utils.wildcard",
    "faulthandler",
    "sqlite3",
    "tornado.locks",
    "tornado.platform.asyncio",
    "tornado.queues",
)
_kw_environ = dict(__import__("os").environ)
_kw_failed = []
for _kw_name in _kw_kernel_modules + tuple(_kw_preload):
    try:
        __import__(_kw_name)
    except BaseException as _kw_error:  # noqa: BLE001 (a preload may fail any way: the launcher says which)
        _kw_failed.append("%s (%s: %s)" % (_kw_name, type(_kw_error).__name__, _kw_error))
_kw_preloaded = set(sys.modules)
import os  # noqa: E402

# Variables the imports set in the launcher's environment, as they set them in a cold kernel's (debugpy sets
# PYDEVD_USE_FRAME_EVAL when the kernel's environment has none): a forked kernel gets them the same way.
_kw_set_by_imports = {k: v for k, v in os.environ.items() if _kw_environ.get(k) != v}
del _kw_environ

# Descriptors the preload opened on /dev/null (IPython keeps one open for its life): a forked kernel gets its own.
_kw_devnull_fds = []
for _kw_entry in os.listdir("/proc/self/fd"):
    try:
        if int(_kw_entry) > 2 and os.readlink("/proc/self/fd/" + _kw_entry) == os.devnull:
            _kw_devnull_fds.append(int(_kw_entry))
    except OSError:
        pass

import ctypes  # noqa: E402
import fcntl  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

_kw_own_modules = set(sys.modules) - _kw_preloaded
_kw_base_path = list(sys.path)
_kw_launcher_pythonpath = os.environ.get("PYTHONPATH", "")
_kw_main_keys = {"__name__", "__doc__", "__package__", "__loader__", "__spec__", "__annotations__", "__builtins__"}


def _kw_path_entries(value, cwd):
    return [os.path.abspath(os.path.join(cwd, entry)) for entry in value.split(os.pathsep)] if value else []


def _kw_areas():
    """(arg_start, arg_end, env_start, env_end) of this process, from /proc/self/stat."""
    with open("/proc/self/stat", "rb") as handle:
        fields = handle.read().rsplit(b")", 1)[1].split()
    # Fields 48-51 of stat(5), counted from field 3 (state) here.
    return tuple(int(fields[i]) for i in (45, 46, 47, 48))


def _kw_block(items):
    return b"".join(item.encode("utf-8", "surrogateescape") + b"\0" for item in items)


def _kw_fits(argv, env):
    arg_start, arg_end, env_start, env_end = _kw_areas()
    envb = _kw_block("%s=%s" % kv for kv in env.items())
    return len(_kw_block(argv)) <= arg_end - arg_start and len(envb) <= env_end - env_start


def _kw_rewrite_proc(argv, env):
    """Writes `argv` and `env` over this process's original command line and environment (as /proc shows them)."""
    arg_start, arg_end, env_start, env_end = _kw_areas()
    mem = os.open("/proc/self/mem", os.O_RDWR)
    try:
        for start, end, block in (
            (arg_start, arg_end, _kw_block(argv)),
            (env_start, env_end, _kw_block("%s=%s" % kv for kv in env.items())),
        ):
            os.pwrite(mem, block + b"\0" * (end - start - len(block)), start)
    finally:
        os.close(mem)


def _kw_fork_safety():
    """Why forking is unsafe here, or None: a thread, a zmq Context or an event loop exists."""
    if threading.active_count() > 1:
        return "%d Python threads" % threading.active_count()
    zmq = sys.modules.get("zmq")
    if zmq is not None and getattr(zmq.Context, "_instance", None) is not None:
        return "a zmq Context exists"
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None:
        if asyncio.events._get_running_loop() is not None:
            return "an asyncio loop runs"
        policy = asyncio.events._event_loop_policy
        local = getattr(policy, "_local", None)
        if local is not None and getattr(local, "_loop", None) is not None:
            return "an asyncio loop exists"
    ioloop = sys.modules.get("tornado.ioloop")
    if ioloop is not None and getattr(ioloop.IOLoop, "_ioloop_for_asyncio", None):
        return "a tornado IOLoop exists"
    return None


def _kw_send(sock, message):
    sock.send(json.dumps(message).encode())


def _kw_child(request, log_fd, sock, libc):
    """Runs in the forked child: becomes the requested kernel, or exits 127 with the reason in its log."""
    argv, env, cwd = request["argv"], request["env"], request["cwd"]
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != request["launcher"]:
            os._exit(1)
        sock.detach()
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        stdin_r, stdin_w = os.pipe()
        os.dup2(stdin_r, 0)
        for fd in [int(entry) for entry in os.listdir("/proc/self/fd")]:
            if fd > 2 and fd not in _kw_devnull_fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
        for fd in _kw_devnull_fds:
            fresh = os.open(os.devnull, fcntl.fcntl(fd, fcntl.F_GETFL) & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR))
            os.dup2(fresh, fd, inheritable=os.get_inheritable(fd))
            os.close(fresh)
        del stdin_r, stdin_w, log_fd
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        for name, value in _kw_set_by_imports.items():
            os.environ.setdefault(name, value)
        _kw_rewrite_proc(argv, env)
        time.tzset()
        extra = _kw_path_entries(env.get("PYTHONPATH", ""), cwd)
        dropped = set(_kw_path_entries(_kw_launcher_pythonpath, "/"))
        sys.path[:] = extra + [p for p in _kw_base_path if p not in dropped]
        random.seed()
        numpy_random = sys.modules.get("numpy.random")
        if numpy_random is not None:
            numpy_random.seed()
        uuid = sys.modules.get("uuid")
        if uuid is not None and hasattr(uuid, "_last_timestamp"):
            uuid._last_timestamp = None
        sys.argv[:] = ["-c"] + list(argv[3:])
        if hasattr(sys, "orig_argv"):
            sys.orig_argv[:] = list(argv)
        code = compile(argv[2], "<string>", "exec")
    except BaseException as error:  # noqa: BLE001
        os.write(2, ("kernelwarden launcher: the kernel could not start: %r\n" % (error,)).encode())
        os._exit(127)
    main = sys.modules["__main__"]
    namespace = main.__dict__
    for name in _kw_own_modules:
        sys.modules.pop(name, None)
    keep = _kw_main_keys
    for name in [name for name in namespace if name not in keep]:
        del namespace[name]
    exec(code, namespace)


def _kw_status(status):
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _kw_hello(me):
    """The launcher's first message to the server: ready to fork, or unsafe and why."""
    unsafe = _kw_fork_safety()
    try:
        import ipykernel

        ipykernel_version = ipykernel.__version__
    except Exception:  # noqa: BLE001
        ipykernel_version = None
    hello = {
        "op": "ready" if unsafe is None else "unsafe",
        "pid": me,
        "python": sys.executable,
        "version": "%d.%d.%d" % sys.version_info[:3],
        "ipykernel": ipykernel_version,
        "preload": _kw_preload,
        "failed": _kw_failed,
        "set_by_imports": _kw_set_by_imports,
        "reason": unsafe,
        "tasks": len(os.listdir("/proc/self/task")),
    }
    if ipykernel_version is None:
        hello["op"] = "unsafe"
        hello["reason"] = "ipykernel does not import"
    return hello


def _kw_reap(sock, kernels):
    """Tells the server the exit status of every kernel that exited."""
    while kernels:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        kernels.discard(pid)
        _kw_send(sock, {"op": "exit", "pid": pid, "status": _kw_status(status)})


def _kw_refusal(request, log_fd):
    """Why `request` cannot be forked; None when it can."""
    if log_fd < 0:
        return "no log descriptor"
    if not os.path.isdir(request["cwd"]):
        return "no directory %s" % request["cwd"]
    if not _kw_fits(request["argv"], request["env"]):
        return "the command line or environment is larger than the launcher's room"
    return _kw_fork_safety()


def _kw_wake_on_signals():
    """A pipe that becomes readable when a signal (SIGCHLD) arrives, for the select loop."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return wake_r


def _kw_serve():
    libc = ctypes.CDLL(None, use_errno=True)
    sock = socket.socket(fileno=_kw_fd)
    sock.setblocking(True)
    me = os.getpid()
    hello = _kw_hello(me)
    _kw_send(sock, hello)
    if hello["op"] != "ready":
        return
    # What the launcher imported is moved out of the garbage collector's reach (gc.freeze, Python 3.7+): a kernel's
    # collections do not walk it (nor touch its pages, which stay shared with the launcher).
    gc.collect()
    if hasattr(gc, "freeze"):
        gc.freeze()
    wake_r = _kw_wake_on_signals()
    kernels = set()
    while True:
        try:
            ready, _, _ = select.select([sock, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in ready:
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
        _kw_reap(sock, kernels)
        if sock not in ready:
            continue
        data, fds, _, _ = socket.recv_fds(sock, 1 << 22, 1)
        if not data:
            return  # the server is gone
        request = json.loads(data)
        log_fd = fds[0] if fds else -1
        reason = _kw_refusal(request, log_fd)
        if reason is not None:
            if log_fd >= 0:
                os.close(log_fd)
            _kw_send(sock, {"op": "refused", "id": request["id"], "reason": reason})
            continue
        request["launcher"] = me
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _kw_child(request, log_fd, sock, libc)
            return
        os.close(log_fd)
        kernels.add(pid)
        _kw_send(sock, {"op": "started", "id": request["id"], "pid": pid})


_kw_serve()
