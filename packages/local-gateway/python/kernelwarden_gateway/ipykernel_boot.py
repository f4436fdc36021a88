# The boot of every IPython kernel of kernelwarden's embedded jupyter-server. The server runs it as
# `python -c "_kw_drop_safepath = <bool>\n<this file>" ...args` in place of `python -m ipykernel_launcher ...args`
# (launch.boot_ipykernel), with PYTHONSAFEPATH=1 for the launch: nothing the kernel imports while it starts comes from
# its working directory (a workspace's zmq.py or tornado.py). It is never imported as a module.
#
# - PYTHONSAFEPATH is taken out of the environment again (unless the kernel's requester set it), and the working
#   directory goes on sys.path once the kernel is initialised, where IPython puts it: cells import from it as in any
#   IPython kernel. Python older than 3.11 ignores PYTHONSAFEPATH; the first lines do the same.
# - The kernel's PUB/XPUB sockets get an unbounded send high-water mark before they bind: with ZMQ's default of
#   1,000 messages, output past the mark vanishes when the server's reader falls behind.
# - ipykernel's fork-output pipe (the PULL socket a forked child sends its output through, on tcp 127.0.0.1 where any
#   local user could reach it) is an ipc socket in the kernel's own private directory instead; a message without the
#   pipe's random id is dropped, never printed into the running cell.
import sys

if sys.path and sys.path[0] in ("", "."):
    del sys.path[0]
import os

if _kw_drop_safepath:  # noqa: F821 (defined by the line the launch puts before this file)
    os.environ.pop("PYTHONSAFEPATH", None)
import runpy
import stat

import zmq
from zmq.eventloop.zmqstream import ZMQStream as _kw_Stream

_kw_socket = zmq.Context.socket


def _kw_unbounded(self, kind, *args, **kwargs):
    sock = _kw_socket(self, kind, *args, **kwargs)
    if kind in (zmq.PUB, zmq.XPUB):
        sock.setsockopt(zmq.SNDHWM, 0)
    return sock


zmq.Context.socket = _kw_unbounded
# A kernel forked from a launcher finds the kernel machinery imported already; a cold one imports it here.
_kw_forked = "ipykernel.kernelapp" in sys.modules
from ipykernel import iostream as _kw_io  # noqa: E402
from ipykernel import kernelapp as _kw_app  # noqa: E402

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


def _kw_exit_as_the_interpreter_would():
    """Ends a forked kernel that shut down: what the interpreter does at exit that code can see, then _exit.

    Python's exit joins the non-daemon threads, runs the atexit functions (IPython's clears the user's namespaces, so
    their objects are released and their files flushed) and flushes the standard streams; then it tears every module
    down. In a forked kernel that teardown writes to every page it shares with its launcher (~30 ms of copy-on-write
    faults) for nothing anyone sees: files still open are flushed instead, and the process ends with status 0.
    """
    import atexit
    import gc
    import io
    import threading

    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    gc.collect()
    for obj in gc.get_objects():
        if isinstance(obj, (io.BufferedWriter, io.BufferedRandom, io.TextIOWrapper)):
            try:
                if not obj.closed:
                    obj.flush()
            except Exception:  # noqa: BLE001 (a stream that cannot flush is left, as at exit)
                pass
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    os._exit(0)


runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
if _kw_forked:
    _kw_exit_as_the_interpreter_would()
