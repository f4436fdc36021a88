"""The journal's subscription to one kernel's iopub (see extension.py): a ZMQ SUB socket of the server's own, drained
on the server's event loop, each message recorded in the kernel's Journal as the kernel's signed frames."""

import asyncio
import hmac
import json
import time

import zmq
from tornado.ioloop import IOLoop

DELIMITER = b"<IDS|MSG>"
# The most messages recorded in one turn of the event loop: a flood does not starve the server's other work.
BATCH = 1000
# How long a start or restart waits for the journal's subscription to hear the kernel (nudged with kernel_info).
SUBSCRIBE_WAIT_S = 30.0
NUDGE_FIRST_S = 0.1
NUDGE_MAX_S = 1.0
# How soon the subscription reconnects to a kernel whose process was replaced (an auto-restart binds the same ipc
# paths): ZMQ's default is 100-200 ms, and a forked kernel serves its first request well within that, so the journal
# would miss what the new process sent before it got through. Reconnecting on ipc is cheap.
RECONNECT_MS = 5
# How long a channels WebSocket to a kernel the server restarted on its own waits for the journal to hear its new
# process.
CHANNELS_WAIT_S = 10.0


class Recorder:
    """One kernel's subscription to its iopub, feeding its journal: a SUB socket of its own, drained in batches on the
    server's event loop, each message kept as the kernel's frames (signature checked, header read, nothing else)."""

    def __init__(self, kernel, journal, log, kernel_id):
        self.kernel = kernel
        self.journal = journal
        self.log = log
        self.kernel_id = kernel_id
        self.session = kernel.session
        self.heard = 0
        self.closed = False
        # The session of a process that was replaced (a restart began): the journal has not heard the new process
        # until it records a message of another session.
        self.replaced_session = None
        # Set (and replaced) each time messages were recorded: what a long poll waits on.
        self.changed = asyncio.Event()
        self.socket = zmq.Context.instance().socket(zmq.SUB)
        self.socket.linger = 0
        self.socket.reconnect_ivl = RECONNECT_MS
        self.socket.setsockopt(zmq.SUBSCRIBE, b"")
        self.socket.connect(kernel._make_url("iopub"))
        self.loop = IOLoop.current()
        self.loop.add_handler(self.socket, self.drain, IOLoop.READ)
        self.loop.add_callback(self.drain)

    def drain(self, *_):
        if self.closed:
            return
        socket = self.socket
        heard = self.heard
        try:
            for _ in range(BATCH):
                try:
                    parts = socket.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    return
                except zmq.ZMQError as error:
                    self.log.warning("kernelwarden journal of %s: iopub read failed (%s)", self.kernel_id, error)
                    return
                self.record(parts)
            self.loop.add_callback(self.drain)
        finally:
            if self.heard != heard:
                changed, self.changed = self.changed, asyncio.Event()
                changed.set()

    def record(self, parts):
        try:
            at = parts.index(DELIMITER)
            signature = parts[at + 1]
            frames = tuple(parts[at + 2 :])
            if len(frames) < 4:
                raise ValueError("%d frames" % len(frames))
            if self.session.auth is not None and not hmac.compare_digest(self.session.sign(frames[:4]), signature):
                raise ValueError("bad signature")
            header = json.loads(frames[0])
            parent = json.loads(frames[1]) if len(frames[1]) > 2 else {}
            msg_type = header.get("msg_type")
            idle = (
                msg_type == "status" and b"idle" in frames[3] and json.loads(frames[3]).get("execution_state") == "idle"
            )
        except Exception as error:  # a message the server itself could not read either
            self.log.warning("kernelwarden journal of %s: unreadable iopub message (%s)", self.kernel_id, error)
            return
        self.heard += 1
        self.journal.append(header.get("msg_id"), msg_type, parent.get("msg_id"), header.get("session"), frames, idle)

    def replacing(self):
        """The kernel's process is being replaced (a restart began): `hears_current()` is false until the journal
        recorded a message of the new process."""
        self.replaced_session = self.journal.session

    def hears_current(self):
        """The journal recorded a message of the kernel's current process."""
        session = self.journal.session
        return session is not None and session != self.replaced_session

    async def recorded_before(self, deadline):
        """Waits until the subscription records something (or closes); False when `deadline` (time.monotonic())
        came first."""
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            await asyncio.wait_for(self.changed.wait(), left)
        except asyncio.TimeoutError:
            return False
        return True

    async def until(self, heard, alive, timeout=SUBSCRIBE_WAIT_S):
        """Nudges the kernel with kernel_info_requests (on a shell socket of its own, at growing intervals) until
        `heard()`: the subscription is through, and nothing the kernel sends from here on passes the journal by. Stops
        early when `await alive()` is false (the kernel died or went)."""
        deadline = time.monotonic() + timeout
        shell = None
        pause = NUDGE_FIRST_S
        try:
            while not heard() and not self.closed and time.monotonic() < deadline and await alive():
                if shell is None:
                    shell = zmq.Context.instance().socket(zmq.DEALER)
                    shell.linger = 0
                    # A kernel still starting may not have bound its shell: the nudge goes as soon as it has.
                    shell.reconnect_ivl = RECONNECT_MS
                    shell.connect(self.kernel._make_url("shell"))
                self.session.send(shell, "kernel_info_request")
                # Woken as soon as the subscription records something (not at the next poll).
                nudge_until = time.monotonic() + pause
                while not heard() and not self.closed:
                    if not await self.recorded_before(nudge_until):
                        break
                pause = min(NUDGE_MAX_S, pause * 2)
        finally:
            if shell is not None:
                shell.close(linger=0)

    def close(self):
        if self.closed:
            return
        self.closed = True
        self.changed.set()
        try:
            self.loop.remove_handler(self.socket)
        except Exception:
            pass
        self.socket.close(linger=0)
