"""Start capacity of the embedded server: it replaces jupyter-server's POST /api/kernels and wraps its
DELETE /api/kernels/{id} (both still authenticated and authorized as jupyter-server's own).

- A start queue: at most `max_starting` kernels start at once; a start takes a slot from its launch until the kernel
  answers a kernel_info_request (or `ready_wait` seconds), first come, first served. The warm pool's refills queue
  like any create.
- A kernel limit: past `max_kernels` kernels (running plus starting), a create waits for one to go.
- Bounded waits, with reasons: a create waits at most `max_wait` seconds, or the kernelwarden_wait_ms of its body
  when shorter; then it is answered 503 {reason: 'at-capacity', max_kernels} or {reason: 'busy', waited_ms}.
- The wait, said: a created kernel's model carries kernelwarden_queued_ms.
- The id a create asks for: kernel_id in the body (a UUID, not in use) becomes the kernel's id; a DELETE of that id
  while the create waits or starts withdraws it (answered 204; the create is answered 410, its kernel shut down if
  it had started).
- No kernel for a requester who left: a create whose connection closed while it waited is dropped; one whose
  connection closed while its kernel started has that kernel shut down instead of answered.
"""

import asyncio
import concurrent.futures
import json
import queue
import re
import time

from jupyter_server.auth import authorized
from jupyter_server.services.kernels import handlers
from jupyter_server.utils import ensure_async, url_escape, url_path_join
from tornado import web

try:
    from jupyter_client.jsonutil import json_default
except ImportError:
    from jupyter_client.jsonutil import date_default as json_default

POLL = 0.25
UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class Limits:
    """The start capacity of one server run (seconds for the waits)."""

    def __init__(self, max_starting, max_kernels, max_wait, ready_wait):
        self.max_starting = max(1, int(max_starting))
        self.max_kernels = max(1, int(max_kernels))
        self.max_wait = float(max_wait)
        self.ready_wait = float(ready_wait)


class Ticket:
    """One create's place in the queue."""

    def __init__(self, kernel_id):
        self.kernel_id = kernel_id
        self.gone = False
        self.cancelled = False


class Gate:
    """The first-come, first-served start queue and the kernel limit."""

    def __init__(self, limits, clock=time.monotonic):
        self.limits = limits
        self.clock = clock
        self.starting = 0
        self.queue = []
        self.by_id = {}
        self._event = None

    def wake(self):
        event, self._event = self._event, None
        if event is not None:
            event.set()

    def _changed(self):
        if self._event is None:
            self._event = asyncio.Event()
        return self._event

    def blocked(self, km):
        """What holds a start now: 'busy' (every slot taken), 'at-capacity' (the kernel limit) or None."""
        if self.starting >= self.limits.max_starting:
            return "busy"
        if len(km.list_kernel_ids()) + self.starting >= self.limits.max_kernels:
            return "at-capacity"
        return None

    async def enter(self, km, ticket, wait):
        """None once the ticket holds a start slot; else why not: 'busy', 'at-capacity' or 'withdrawn'."""
        deadline = self.clock() + wait
        self.queue.append(ticket)
        try:
            while True:
                if ticket.gone or ticket.cancelled:
                    return "withdrawn"
                blocked = self.blocked(km)
                if blocked is None and self.queue[0] is ticket:
                    self.starting += 1
                    return None
                left = deadline - self.clock()
                if left <= 0:
                    return blocked or "busy"
                # Starts ending and creates leaving wake the queue; kernels going away are looked for every POLL.
                pause = min(left, POLL) if blocked == "at-capacity" else left
                try:
                    await asyncio.wait_for(self._changed().wait(), pause)
                except asyncio.TimeoutError:
                    pass
        finally:
            self.queue.remove(ticket)
            self.wake()

    def leave(self):
        self.starting -= 1
        self.wake()


gate = None


def requested_wait(model, max_wait):
    """The wait a create gets: `max_wait`, or its body's kernelwarden_wait_ms when shorter and not negative."""
    asked = model.get("kernelwarden_wait_ms")
    if isinstance(asked, (int, float)) and not isinstance(asked, bool) and asked >= 0:
        return min(max_wait, asked / 1000.0)
    return max_wait


def _answered(km, kernel_id, info=None):
    """The kernel answered kernel_info (`info`, the reply's content): the server records it idle, not 'starting', and
    keeps the reply for the kernel's first channels WebSocket.

    jupyter-server asks a kernel for kernel_info as the first WebSocket to it opens, and keeps the answer on the
    kernel for later ones (`_kernel_info_future`, 1.23 and 2.x alike): given this one, the WebSocket opens without
    that round trip to the kernel.

    The server learns a kernel's state from the status messages of its own iopub subscription, made as the kernel was
    launched; a kernel that booted before that subscription took effect (a forked one, in milliseconds) published its
    first ones to nobody, and what the subscription did receive may wait in its socket until another message wakes it.
    jupyter_server 2 holds every WebSocket opened to a kernel it still thinks is starting (polling every 50 ms until a
    status arrives, which its nudge may only bring half a second later).
    """
    try:
        kernel = km.get_kernel(kernel_id)
    except KeyError:
        return
    # What the subscription has received and not handed on goes first: the kernel's own 'starting' status, taken
    # in after this, would make it starting again.
    stream = getattr(kernel, "_activity_stream", None)
    if stream is not None:
        try:
            stream.flush()
        except Exception:
            pass
    # The kernel's own 'starting' status may also arrive after this (its iopub and the reply's shell socket are not
    # ordered): a process that answered is not starting again. A new process (a restart) starts as any.
    pid = getattr(getattr(kernel, "provisioner", None), "pid", None)
    has_trait = getattr(kernel, "has_trait", None)
    if pid is not None and has_trait is not None and has_trait("execution_state"):
        if getattr(kernel, "_kernelwarden_answered_pid", None) is None:
            kernel.observe(_not_starting_again, names="execution_state")
        kernel._kernelwarden_answered_pid = pid
    if getattr(kernel, "execution_state", None) == "starting":
        kernel.execution_state = "idle"
    if isinstance(info, dict) and info.get("status") == "ok" and not hasattr(kernel, "_kernel_info_future"):
        known = concurrent.futures.Future()
        known.set_result(info)
        kernel._kernel_info_future = known


def _not_starting_again(change):
    kernel = change["owner"]
    answered = getattr(kernel, "_kernelwarden_answered_pid", None)
    if change["new"] == "starting" and answered == getattr(getattr(kernel, "provisioner", None), "pid", None):
        kernel.execution_state = "idle"


# Kernels whose create is still waiting for their first kernel_info_reply: set once that wait ended.
_holds = {}


async def held_start_ended(kernel_id, at_most=1.0):
    """Waits (at most `at_most` seconds) for the create of kernel `kernel_id` to have seen its kernel_info_reply.

    A channels WebSocket opened as a new kernel answers jupyter-server's own kernel_info can be prepared a moment
    before the create's reply is handled (the kernel answers both at once): jupyter_server 2 would then find the kernel
    still 'starting' and wait for it in 50 ms polls.
    """
    ended = _holds.get(kernel_id)
    if ended is not None:
        try:
            await asyncio.wait_for(ended.wait(), at_most)
        except asyncio.TimeoutError:
            pass


async def hold_until_ready(km, kernel_id):
    # The start slot stays taken until the kernel answers kernel_info (its interpreter booted) or the wait ends.
    client = None
    ended = _holds[kernel_id] = asyncio.Event()
    try:
        client = km.get_kernel(kernel_id).client()
        client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
        deadline = time.monotonic() + gate.limits.ready_wait
        while time.monotonic() < deadline and kernel_id in km:
            msg_id = client.kernel_info()
            try:
                while True:
                    reply = await ensure_async(client.shell_channel.get_msg(timeout=1.0))
                    if reply.get("parent_header", {}).get("msg_id") == msg_id:
                        _answered(km, kernel_id, reply.get("content"))
                        return
            except queue.Empty:
                continue
    except Exception:
        pass
    finally:
        if client is not None:
            try:
                client.stop_channels()
            except Exception:
                pass
        if _holds.get(kernel_id) is ended:
            del _holds[kernel_id]
        ended.set()
        gate.leave()


def _refuse(handler, status, reason, message, **extra):
    handler.set_status(status)
    handler.set_header("Content-Type", "application/json")
    if status == 503:
        handler.set_header("Retry-After", "1")
    body = {"message": message, "reason": reason}
    body.update(extra)
    handler.finish(json.dumps(body))


@web.authenticated
@authorized
async def _post(self):
    km = self.kernel_manager
    limits = gate.limits
    model = self.get_json_body() or {}
    name = model.get("name") or km.default_kernel_name
    kernel_id = model.get("kernel_id")
    if kernel_id is not None and (not isinstance(kernel_id, str) or not UUID.match(kernel_id)):
        return _refuse(self, 400, "bad-kernel-id", "kernel_id must be a UUID")
    if kernel_id is not None and (kernel_id in km or kernel_id in gate.by_id):
        return _refuse(self, 409, "kernel-id-taken", "kernel_id " + kernel_id + " is in use")
    wait = requested_wait(model, limits.max_wait)
    ticket = Ticket(kernel_id)
    self._kwq_ticket = ticket
    if kernel_id is not None:
        gate.by_id[kernel_id] = ticket
    began = time.monotonic()
    try:
        blocked = await gate.enter(km, ticket, wait)
        waited_ms = int((time.monotonic() - began) * 1000)
        if blocked == "withdrawn":
            if not ticket.gone:
                _refuse(self, 410, "withdrawn", "the create was withdrawn (its kernel id was deleted)")
            return
        if blocked == "at-capacity":
            return _refuse(
                self,
                503,
                "at-capacity",
                "the gateway runs its limit of %d kernels; none went within %d ms" % (limits.max_kernels, waited_ms),
                max_kernels=limits.max_kernels,
                waited_ms=waited_ms,
            )
        if blocked == "busy":
            return _refuse(
                self,
                503,
                "busy",
                "the gateway's start queue did not reach this create within %d ms (%d kernels start at once)"
                % (waited_ms, limits.max_starting),
                waited_ms=waited_ms,
            )
        held = False
        try:
            kwargs = {"kernel_name": name, "path": model.get("path")}
            if kernel_id is not None:
                kwargs["kernel_id"] = kernel_id
            started = await ensure_async(km.start_kernel(**kwargs))
            asyncio.ensure_future(hold_until_ready(km, started))
            held = True
        finally:
            if not held:
                gate.leave()
        if ticket.gone or ticket.cancelled:
            try:
                await ensure_async(km.shutdown_kernel(started, now=True))
            except Exception:
                pass  # deleted meanwhile
            if not ticket.gone:
                _refuse(self, 410, "withdrawn", "the create was withdrawn (its kernel id was deleted)")
            return
        answer = dict(await ensure_async(km.kernel_model(started)))
        answer["kernelwarden_queued_ms"] = waited_ms
        self.set_header("Location", url_path_join(self.base_url, "api", "kernels", url_escape(started)))
        self.set_status(201)
        self.finish(json.dumps(answer, default=json_default))
    finally:
        if kernel_id is not None and gate.by_id.get(kernel_id) is ticket:
            del gate.by_id[kernel_id]


def _on_connection_close(self):
    ticket = getattr(self, "_kwq_ticket", None)
    if ticket is not None:
        ticket.gone = True
        gate.wake()
    return web.RequestHandler.on_connection_close(self)


_original_delete = handlers.KernelHandler.delete


@web.authenticated
@authorized
async def _patched_delete(self, kernel_id):
    ticket = gate.by_id.get(kernel_id)
    if ticket is not None and kernel_id not in self.kernel_manager:
        ticket.cancelled = True
        gate.wake()
        self.set_status(204)
        self.finish()
        return
    if ticket is not None:
        ticket.cancelled = True
    return await _original_delete.__wrapped__.__wrapped__(self, kernel_id)


def install(limits):
    """Sets this run's limits and replaces the kernel handlers' create and delete (once per process)."""
    global gate
    if gate is None:
        gate = Gate(limits)
    else:
        gate.limits = limits
    if getattr(handlers.MainKernelHandler, "_kernelwarden_capacity", False):
        return
    handlers.MainKernelHandler.post = _post
    handlers.MainKernelHandler.on_connection_close = _on_connection_close
    if hasattr(getattr(_original_delete, "__wrapped__", None), "__wrapped__"):
        handlers.KernelHandler.delete = _patched_delete
    handlers.MainKernelHandler._kernelwarden_capacity = True
