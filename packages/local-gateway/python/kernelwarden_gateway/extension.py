"""The jupyter-server extension of the embedded server: a journal per kernel, and its HTTP endpoint.

From the moment a kernel starts, the server holds one subscription of its own to the kernel's iopub and records every
message in the kernel's Journal (numbered, bounded, see journal.py), whoever is connected. A client reads it at

    GET /api/kernels/<kernel id>/journal?after=<generation>.<seq>   everything after that number
    GET /api/kernels/<kernel id>/journal?after_msg_id=<msg id>       everything after that message
    GET /api/kernels/<kernel id>/journal?cell=<request msg id>       one cell's messages, and whether it finished

with `wait_for_msg_id=<msg id>&wait_ms=<n>` (at most 10 s) to answer only once the journal holds that message, and
`after=<number>&wait_ms=<n>` alone to answer as soon as it holds anything past that number (a long poll),

answered as JSON {kernel_id, last, lost, more, held, entries: [{n: [generation, seq], msg}], complete?}; `lost` is
null or {from, to} (numbers, inclusive) that fell out of retention; `more` says the answer stopped at `max_bytes`
(default 4 MiB) and the next read continues after the last entry; `held` is {entries, bytes}, what the journal keeps
now. A create or restart of a kernel is answered once the journal's subscription hears the (new) kernel process, and a
channels WebSocket to a kernel the server restarted on its own (its auto-restart, after the process died) opens once
the journal heard the new process: no message bound for a client passes the journal by. The kernel model says the
journal is there:
`kernelwarden_journal: {version, max_bytes, max_age_ms}`.
"""

import json
import time

from jupyter_server.auth import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.services.kernels.handlers import _kernel_id_regex
from jupyter_server.utils import ensure_async, url_path_join
from tornado import web
from tornado.ioloop import PeriodicCallback

from .capacity import held_start_ended
from .journal import Journal
from .recorder import CHANNELS_WAIT_S, Recorder

try:
    from jupyter_client.jsonutil import json_default
except ImportError:
    from jupyter_client.jsonutil import date_default as json_default

VERSION = 1
DEFAULT_PAGE_BYTES = 4 * 1024 * 1024
SWEEP_MS = 10_000
MAX_WAIT_S = 10.0


class KernelJournals:
    """The journals of one server's kernels, each fed by a subscription of its own to the kernel's iopub."""

    def __init__(self, km, max_bytes, max_age_s, log):
        self.km = km
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self.log = log
        self.journals = {}
        self.recorders = {}

    def open(self, kernel_id):
        """Starts recording the kernel's iopub; returns its Recorder."""
        if kernel_id in self.recorders:
            return self.recorders[kernel_id]
        kernel = self.km.get_kernel(kernel_id)
        journal = Journal(self.max_bytes, self.max_age_s)
        recorder = Recorder(kernel, journal, self.log, kernel_id)
        self.journals[kernel_id] = journal
        self.recorders[kernel_id] = recorder
        return recorder

    def close(self, kernel_id):
        self.journals.pop(kernel_id, None)
        recorder = self.recorders.pop(kernel_id, None)
        if recorder is not None:
            recorder.close()

    def sweep(self):
        for kernel_id in list(self.journals):
            if kernel_id not in self.km:
                self.close(kernel_id)

    def close_all(self):
        for kernel_id in list(self.journals):
            self.close(kernel_id)


journals = None


def _number(text):
    generation, _, seq = text.partition(".")
    number = (int(generation), int(seq))
    if number[0] < 0 or number[1] < 0:
        raise ValueError(text)
    return number


def page(entries, max_bytes):
    """The entries' JSON (bytes) that fit in `max_bytes` (at least one), and whether some were left for the next
    read."""
    out = []
    used = 0
    for entry in entries:
        text = entry.json()
        if out and used + len(text) > max_bytes:
            return out, True
        out.append(text)
        used += len(text) + 1
    return out, False


def _lost(lost):
    return None if lost is None else {"from": list(lost[0]), "to": list(lost[1])}


class JournalHandler(APIHandler):
    auth_resource = "kernels"

    @web.authenticated
    @authorized
    async def get(self, kernel_id):
        journal = journals.journals.get(kernel_id) if journals is not None else None
        if journal is None or kernel_id not in self.kernel_manager:
            raise web.HTTPError(404, "no journal for kernel %s" % kernel_id)
        try:
            max_bytes = int(self.get_query_argument("max_bytes", str(DEFAULT_PAGE_BYTES)))
        except ValueError:
            raise web.HTTPError(400, "max_bytes must be a number")
        wait_for = self.get_query_argument("wait_for_msg_id", None)
        wait_ms = self.get_query_argument("wait_ms", None)
        after = self.get_query_argument("after", None)
        if wait_ms is not None:
            try:
                wait = min(MAX_WAIT_S, max(0.0, float(wait_ms) / 1000))
            except ValueError:
                raise web.HTTPError(400, "wait_ms must be a number")
            if wait_for is not None:
                # The journal is a subscriber of its own: a client that already holds a live message waits until the
                # journal holds it too, so that what it reads next joins what it holds with nothing between.
                ready = lambda: journal.number_of(wait_for) is not None  # noqa: E731
            elif after is not None and self.get_query_argument("cell", None) is None:
                # A long poll: answered as soon as the journal holds anything past `after`.
                try:
                    bound = _number(after)
                except ValueError:
                    raise web.HTTPError(400, "after must be <generation>.<seq>")
                ready = lambda: journal.last > bound  # noqa: E731
            else:
                ready = lambda: True  # noqa: E731
            until = time.monotonic() + wait
            recorder = journals.recorders.get(kernel_id)
            while not ready() and recorder is not None and not recorder.closed:
                if not await recorder.recorded_before(until):
                    break
        answer = {"kernel_id": kernel_id, "last": list(journal.last), "lost": None, "held": journal.held()}
        cell = self.get_query_argument("cell", None)
        after_msg_id = self.get_query_argument("after_msg_id", None)
        if cell is not None:
            entries, lost, complete = journal.cell(cell)
            if not journal.known_cell(cell):
                raise web.HTTPError(404, "kernel %s has no message of request %s" % (kernel_id, cell))
            after_number = self.get_query_argument("after", None)
            if after_number is not None:
                try:
                    bound = _number(after_number)
                except ValueError:
                    raise web.HTTPError(400, "after must be <generation>.<seq>")
                entries = [e for e in entries if e.number > bound]
                if lost is not None and lost[1] <= bound:
                    lost = None
            answer["complete"] = complete
            answer["lost"] = _lost(lost)
        else:
            if after_msg_id is not None:
                number = journal.number_of(after_msg_id)
                if number is None:
                    raise web.HTTPError(404, "kernel %s has no record of message %s" % (kernel_id, after_msg_id))
            elif after is not None:
                try:
                    number = _number(after)
                except ValueError:
                    raise web.HTTPError(400, "after must be <generation>.<seq>")
            else:
                number = (0, 0)
            entries, lost = journal.after(number)
            answer["lost"] = _lost(lost)
        texts, more = page(entries, max_bytes)
        answer["more"] = more
        head = json.dumps(answer, default=json_default)
        self.set_header("Content-Type", "application/json")
        self.finish(head[:-1].encode() + b', "entries": [' + b",".join(texts) + b"]}")


def _channels_handlers():
    """The classes that serve `/api/kernels/<id>/channels` on this jupyter-server (1.x and 2.x differ)."""
    classes = []
    try:
        from jupyter_server.services.kernels.websocket import KernelWebsocketHandler

        classes.append(KernelWebsocketHandler)
    except ImportError:
        pass
    try:
        from jupyter_server.services.kernels.handlers import ZMQChannelsHandler

        classes.append(ZMQChannelsHandler)
    except ImportError:
        pass
    return classes


# What a channels WebSocket waits on before it opens (the loaded extension's; see _gate_channels).
_channels_wait = None


def _gate_channels(wait):
    """Makes every channels WebSocket await `wait(kernel_id)` once jupyter-server prepared it (the kernel is ready and
    answered its kernel_info), before it opens; and turns Nagle's algorithm off on it as it opens (TCP_NODELAY, as a
    browser's WebSocket does): jupyter-server never does, so each small frame after the first would wait for the
    client's delayed ACK, up to 40 ms."""
    global _channels_wait
    _channels_wait = wait
    for handler in _channels_handlers():
        if getattr(handler, "_kernelwarden_gated", False):
            continue
        original_pre_get = handler.pre_get
        original_open = handler.open

        async def pre_get(self, _original=original_pre_get):
            await _original(self)
            await held_start_ended(self.kernel_id)
            if _channels_wait is not None:
                await _channels_wait(self.kernel_id)

        def open_without_nagle(self, *args, _original=original_open, **kwargs):
            # tornado's set_nodelay is valid once the connection is established, i.e. from open() on.
            self.set_nodelay(True)
            return _original(self, *args, **kwargs)

        handler.pre_get = pre_get
        handler.open = open_without_nagle
        handler._kernelwarden_gated = True


def _load_jupyter_server_extension(serverapp):
    from . import settings as current

    global journals
    km = serverapp.kernel_manager
    if journals is not None:
        journals.close_all()
        journals = None
    _gate_channels(None)
    if not current.journal_enabled:
        current.extension_loaded()
        return
    journals = KernelJournals(km, current.journal_max_bytes, current.journal_max_age_s, serverapp.log)
    mine = journals

    def alive(kernel_id):
        async def check():
            # A kernel that died while starting is answered at once (the client's start watch says why).
            if kernel_id not in km or kernel_id not in mine.recorders:
                return False
            try:
                return bool(await ensure_async(km.get_kernel(kernel_id).is_alive()))
            except Exception:
                return False

        return check

    start_kernel = km.start_kernel

    async def start_kernel_with_journal(*args, **kwargs):
        kernel_id = await ensure_async(start_kernel(*args, **kwargs))
        try:
            recorder = mine.open(kernel_id)
        except Exception as error:
            serverapp.log.warning("kernelwarden journal of %s not opened (%s)", kernel_id, error)
        else:
            # The server's auto-restart replaces the process: the journal hears the new one before a socket opens to it.
            km.add_restart_callback(kernel_id, recorder.replacing, "restart")
            # The create is answered once the journal hears the kernel: no message to a client passes it by.
            await recorder.until(recorder.hears_current, alive(kernel_id))
        mine.sweep()
        return kernel_id

    km.start_kernel = start_kernel_with_journal

    restart_kernel = km.restart_kernel

    async def restart_kernel_with_journal(kernel_id, *args, **kwargs):
        recorder = mine.recorders.get(kernel_id)
        if recorder is not None:
            recorder.replacing()
        result = await ensure_async(restart_kernel(kernel_id, *args, **kwargs))
        if recorder is not None:
            # The new process's messages (a new session) reach the journal before the restart is answered.
            await recorder.until(recorder.hears_current, alive(kernel_id))
        return result

    km.restart_kernel = restart_kernel_with_journal

    kernel_model = km.kernel_model

    def kernel_model_with_journal(kernel_id):
        model = kernel_model(kernel_id)
        if kernel_id in mine.journals:
            model["kernelwarden_journal"] = {
                "version": VERSION,
                "max_bytes": mine.max_bytes,
                "max_age_ms": int(mine.max_age_s * 1000),
            }
        return model

    km.kernel_model = kernel_model_with_journal

    async def channels_after_journal(kernel_id):
        recorder = mine.recorders.get(kernel_id)
        if recorder is not None and not recorder.hears_current():
            await recorder.until(recorder.hears_current, alive(kernel_id), timeout=CHANNELS_WAIT_S)

    _gate_channels(channels_after_journal)
    PeriodicCallback(mine.sweep, SWEEP_MS).start()
    pattern = url_path_join(serverapp.base_url, r"/api/kernels/%s/journal" % _kernel_id_regex)
    serverapp.web_app.add_handlers(".*$", [(pattern, JournalHandler)])
    current.extension_loaded()
