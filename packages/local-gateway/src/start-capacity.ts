import { availableParallelism, totalmem } from 'node:os';

/**
 * Memory set aside per kernel when `maxKernels` is derived from the machine: 160 MiB (an idle IPython kernel's
 * process is ~60-80 MB resident, its server-side state a few MB; the rest is headroom for the cells' own data).
 */
export const KERNEL_MEMORY_BUDGET_BYTES = 160 * 1024 * 1024;
/** The share of the machine's memory `maxKernels`' default hands to kernels: three quarters. */
const MEMORY_SHARE = 0.75;
/** The longest a create waits in the embedded server's start queue when it does not say: 120 s. */
export const DEFAULT_START_QUEUE_TIMEOUT_MS = 120_000;
/** The longest a start slot stays taken by a kernel that has not answered yet: 60 s. */
const READY_WAIT_MS = 60_000;

/** How many kernels the embedded server starts at once by default: one per core (`os.availableParallelism()`). */
export function defaultMaxConcurrentStarts(cores = availableParallelism()): number {
  return Math.max(1, Math.floor(cores));
}

/**
 * How many kernels the embedded server runs at once by default: three quarters of the machine's memory
 * (`os.totalmem()`) at `KERNEL_MEMORY_BUDGET_BYTES` each, at least 4 — e.g. 115 on 24 GB, 23 on 5 GB.
 */
export function defaultMaxKernels(memoryBytes = totalmem()): number {
  return Math.max(4, Math.floor((memoryBytes * MEMORY_SHARE) / KERNEL_MEMORY_BUDGET_BYTES));
}

/** The start capacity of one embedded server run. */
export interface StartCapacitySettings {
  /** Kernels started at once; the others wait in a first-come, first-served queue. */
  maxConcurrentStarts: number;
  /** Kernels running at once (pooled ones included); a create past it waits for one to go, then answers 503. */
  maxKernels: number;
  /** The longest a create waits in the queue (a create's own `kernelwarden_wait_ms` may shorten it). */
  startQueueTimeoutMs: number;
}

/**
 * The part of LocalGateway's `jupyter_server_config.py` that bounds kernel starts. It replaces jupyter-server's
 * `POST /api/kernels` and wraps its `DELETE /api/kernels/{id}` (both still authenticated and authorized as
 * jupyter-server's own):
 *
 * - **A start queue.** At most `maxConcurrentStarts` kernels start at once: a start takes a slot from its launch
 *   until the kernel answers a `kernel_info_request` (or `READY_WAIT_MS`), so a burst of creates on a small
 *   machine boots interpreters a few at a time instead of all at once, each in its turn (first come, first
 *   served). The warm pool's refills queue like any create.
 * - **A kernel limit.** Past `maxKernels` kernels (running plus starting), a create waits for one to go.
 * - **Bounded waits, with reasons.** A create waits at most `startQueueTimeoutMs`, or the `kernelwarden_wait_ms`
 *   of its body when shorter; then it is answered HTTP 503 `{ reason: 'at-capacity', max_kernels }` (the limit was
 *   what held it) or `{ reason: 'busy', waited_ms }` (the queue was), which GatewayClient raises as
 *   `GatewayCapacityError` / `GatewayBusyError`. Nothing was started.
 * - **The wait, said.** A created kernel's model carries `kernelwarden_queued_ms`, the time its create waited for a
 *   turn: a lease's `GatewayKernel.start()` does not count it toward its `startupTimeoutMs`.
 * - **The id a create asks for.** `kernel_id` in the body (a UUID, not in use) becomes the kernel's id, as on
 *   jupyter-server 2.x; a `DELETE` of that id while the create waits in the queue or starts withdraws it (answered
 *   204; the create is answered 410, its kernel shut down if it had started).
 * - **No kernel for a requester who left.** A create whose connection closed while it waited is dropped; one whose
 *   connection closed while its kernel started has that kernel shut down instead of answered.
 */
export function startCapacityConfig(settings: StartCapacitySettings): string {
  return `
# ---- kernelwarden LocalGateway: start capacity (start-capacity.ts) -------------------------------------------
# A first-come, first-served start queue of ${settings.maxConcurrentStarts} slots, a limit of ${settings.maxKernels} kernels, bounded waits answered
# 503 with a reason, the kernel id a create asks for, and no kernel for a requester whose connection is gone.
import asyncio as _kwq_asyncio
import json as _kwq_json
import queue as _kwq_queue
import re as _kwq_re
import time as _kwq_time

from tornado import web as _kwq_web
from jupyter_server.auth import authorized as _kwq_authorized
from jupyter_server.services.kernels import handlers as _kwq_handlers
from jupyter_server.utils import ensure_async as _kwq_ensure_async
from jupyter_server.utils import url_escape as _kwq_url_escape
from jupyter_server.utils import url_path_join as _kwq_url_path_join

try:
    from jupyter_client.jsonutil import json_default as _kwq_json_default
except ImportError:
    from jupyter_client.jsonutil import date_default as _kwq_json_default

_KWQ_MAX_STARTING = ${Math.max(1, Math.floor(settings.maxConcurrentStarts))}
_KWQ_MAX_KERNELS = ${Math.max(1, Math.floor(settings.maxKernels))}
_KWQ_MAX_WAIT = ${(settings.startQueueTimeoutMs / 1000).toFixed(3)}
_KWQ_READY_WAIT = ${(READY_WAIT_MS / 1000).toFixed(3)}
_KWQ_POLL = 0.25
_KWQ_UUID = _kwq_re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class _KwqTicket:
    def __init__(self, kernel_id):
        self.kernel_id = kernel_id
        self.gone = False
        self.cancelled = False


class _KwqGate:
    def __init__(self):
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
            self._event = _kwq_asyncio.Event()
        return self._event

    def _blocked(self, km):
        if self.starting >= _KWQ_MAX_STARTING:
            return "busy"
        if len(km.list_kernel_ids()) + self.starting >= _KWQ_MAX_KERNELS:
            return "at-capacity"
        return None

    async def enter(self, km, ticket, wait):
        """None once the ticket holds a start slot; else why not: 'busy', 'at-capacity' or 'withdrawn'."""
        deadline = _kwq_time.monotonic() + wait
        self.queue.append(ticket)
        try:
            while True:
                if ticket.gone or ticket.cancelled:
                    return "withdrawn"
                blocked = self._blocked(km)
                if blocked is None and self.queue[0] is ticket:
                    self.starting += 1
                    return None
                left = deadline - _kwq_time.monotonic()
                if left <= 0:
                    return blocked or "busy"
                # Starts ending and creates leaving wake the queue; kernels going away are looked for every _KWQ_POLL.
                pause = min(left, _KWQ_POLL) if blocked == "at-capacity" else left
                try:
                    await _kwq_asyncio.wait_for(self._changed().wait(), pause)
                except _kwq_asyncio.TimeoutError:
                    pass
        finally:
            self.queue.remove(ticket)
            self.wake()

    def leave(self):
        self.starting -= 1
        self.wake()


_kwq_gate = _KwqGate()


async def _kwq_hold_until_ready(km, kernel_id):
    # The start slot stays taken until the kernel answers kernel_info (its interpreter booted) or the wait ends.
    client = None
    try:
        client = km.get_kernel(kernel_id).client()
        client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
        deadline = _kwq_time.monotonic() + _KWQ_READY_WAIT
        while _kwq_time.monotonic() < deadline and kernel_id in km:
            msg_id = client.kernel_info()
            try:
                while True:
                    reply = await _kwq_ensure_async(client.shell_channel.get_msg(timeout=1.0))
                    if reply.get("parent_header", {}).get("msg_id") == msg_id:
                        return
            except _kwq_queue.Empty:
                continue
    except Exception:
        pass
    finally:
        if client is not None:
            try:
                client.stop_channels()
            except Exception:
                pass
        _kwq_gate.leave()


def _kwq_refuse(handler, status, reason, message, **extra):
    handler.set_status(status)
    handler.set_header("Content-Type", "application/json")
    if status == 503:
        handler.set_header("Retry-After", "1")
    body = {"message": message, "reason": reason}
    body.update(extra)
    handler.finish(_kwq_json.dumps(body))


@_kwq_web.authenticated
@_kwq_authorized
async def _kwq_post(self):
    km = self.kernel_manager
    model = self.get_json_body() or {}
    name = model.get("name") or km.default_kernel_name
    kernel_id = model.get("kernel_id")
    if kernel_id is not None and (not isinstance(kernel_id, str) or not _KWQ_UUID.match(kernel_id)):
        return _kwq_refuse(self, 400, "bad-kernel-id", "kernel_id must be a UUID")
    if kernel_id is not None and (kernel_id in km or kernel_id in _kwq_gate.by_id):
        return _kwq_refuse(self, 409, "kernel-id-taken", "kernel_id " + kernel_id + " is in use")
    wait = _KWQ_MAX_WAIT
    asked = model.get("kernelwarden_wait_ms")
    if isinstance(asked, (int, float)) and not isinstance(asked, bool) and asked >= 0:
        wait = min(wait, asked / 1000.0)
    ticket = _KwqTicket(kernel_id)
    self._kwq_ticket = ticket
    if kernel_id is not None:
        _kwq_gate.by_id[kernel_id] = ticket
    began = _kwq_time.monotonic()
    try:
        blocked = await _kwq_gate.enter(km, ticket, wait)
        waited_ms = int((_kwq_time.monotonic() - began) * 1000)
        if blocked == "withdrawn":
            if not ticket.gone:
                _kwq_refuse(self, 410, "withdrawn", "the create was withdrawn (its kernel id was deleted)")
            return
        if blocked == "at-capacity":
            return _kwq_refuse(
                self,
                503,
                "at-capacity",
                "the gateway runs its limit of %d kernels; none went within %d ms" % (_KWQ_MAX_KERNELS, waited_ms),
                max_kernels=_KWQ_MAX_KERNELS,
                waited_ms=waited_ms,
            )
        if blocked == "busy":
            return _kwq_refuse(
                self,
                503,
                "busy",
                "the gateway's start queue did not reach this create within %d ms (%d kernels start at once)"
                % (waited_ms, _KWQ_MAX_STARTING),
                waited_ms=waited_ms,
            )
        held = False
        try:
            kwargs = {"kernel_name": name, "path": model.get("path")}
            if kernel_id is not None:
                kwargs["kernel_id"] = kernel_id
            started = await _kwq_ensure_async(km.start_kernel(**kwargs))
            _kwq_asyncio.ensure_future(_kwq_hold_until_ready(km, started))
            held = True
        finally:
            if not held:
                _kwq_gate.leave()
        if ticket.gone or ticket.cancelled:
            try:
                await _kwq_ensure_async(km.shutdown_kernel(started, now=True))
            except Exception:
                pass  # deleted meanwhile
            if not ticket.gone:
                _kwq_refuse(self, 410, "withdrawn", "the create was withdrawn (its kernel id was deleted)")
            return
        answer = dict(await _kwq_ensure_async(km.kernel_model(started)))
        answer["kernelwarden_queued_ms"] = waited_ms
        self.set_header("Location", _kwq_url_path_join(self.base_url, "api", "kernels", _kwq_url_escape(started)))
        self.set_status(201)
        self.finish(_kwq_json.dumps(answer, default=_kwq_json_default))
    finally:
        if kernel_id is not None and _kwq_gate.by_id.get(kernel_id) is ticket:
            del _kwq_gate.by_id[kernel_id]


def _kwq_on_connection_close(self):
    ticket = getattr(self, "_kwq_ticket", None)
    if ticket is not None:
        ticket.gone = True
        _kwq_gate.wake()
    return _kwq_web.RequestHandler.on_connection_close(self)


_kwq_delete = _kwq_handlers.KernelHandler.delete


@_kwq_web.authenticated
@_kwq_authorized
async def _kwq_patched_delete(self, kernel_id):
    ticket = _kwq_gate.by_id.get(kernel_id)
    if ticket is not None and kernel_id not in self.kernel_manager:
        ticket.cancelled = True
        _kwq_gate.wake()
        self.set_status(204)
        self.finish()
        return
    if ticket is not None:
        ticket.cancelled = True
    return await _kwq_delete.__wrapped__.__wrapped__(self, kernel_id)


if not getattr(_kwq_handlers.MainKernelHandler, "_kernelwarden_capacity", False):
    _kwq_handlers.MainKernelHandler.post = _kwq_post
    _kwq_handlers.MainKernelHandler.on_connection_close = _kwq_on_connection_close
    if hasattr(getattr(_kwq_delete, "__wrapped__", None), "__wrapped__"):
        _kwq_handlers.KernelHandler.delete = _kwq_patched_delete
    _kwq_handlers.MainKernelHandler._kernelwarden_capacity = True
# ---- end of start capacity ----------------------------------------------------------------------------------
`;
}
