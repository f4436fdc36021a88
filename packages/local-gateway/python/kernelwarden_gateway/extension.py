"""The jupyter-server extension of the embedded server: a journal per kernel, and its HTTP endpoint.

From the moment a kernel starts, the server holds one subscription of its own to the kernel's iopub and records every
message in the kernel's Journal (numbered, bounded, see journal.py), whoever is connected. A client reads it at

    GET /api/kernels/<kernel id>/journal?after=<generation>.<seq>   everything after that number
    GET /api/kernels/<kernel id>/journal?after_msg_id=<msg id>       everything after that message
    GET /api/kernels/<kernel id>/journal?cell=<request msg id>       one cell's messages, and whether it finished

with `wait_for_msg_id=<msg id>&wait_ms=<n>` (at most 10 s) to answer only once the journal holds that message,

answered as JSON {kernel_id, last, lost, more, entries: [{n: [generation, seq], msg}], complete?}; `lost` is null or
{from, to} (numbers, inclusive) that fell out of retention; `more` says the answer stopped at `max_bytes` (default
4 MiB) and the next read continues after the last entry. The kernel model says the journal is there:
`kernelwarden_journal: {version, max_bytes, max_age_ms}`.
"""

import asyncio
import base64
import json
import time

from jupyter_client.session import Session
from jupyter_server.auth import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.services.kernels.handlers import _kernel_id_regex
from jupyter_server.utils import ensure_async, url_path_join
from tornado import web
from tornado.ioloop import PeriodicCallback

from .journal import Journal

try:
    from jupyter_client.jsonutil import json_default
except ImportError:
    from jupyter_client.jsonutil import date_default as json_default

VERSION = 1
DEFAULT_PAGE_BYTES = 4 * 1024 * 1024
SWEEP_MS = 10_000
MAX_WAIT_S = 10.0
WAIT_POLL_S = 0.02


class KernelJournals:
    """The journals of one server's kernels, each fed by a subscription of its own to the kernel's iopub."""

    def __init__(self, km, max_bytes, max_age_s, log):
        self.km = km
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self.log = log
        self.journals = {}
        self.streams = {}

    def open(self, kernel_id):
        if kernel_id in self.journals:
            return
        kernel = self.km.get_kernel(kernel_id)
        journal = Journal(self.max_bytes, self.max_age_s)
        stream = kernel.connect_iopub()
        # A session of its own (as jupyter-server's activity watcher has): signatures checked, history not shared.
        session = Session(config=kernel.session.config, key=kernel.session.key)

        def record(frames):
            try:
                _, parts = session.feed_identities(frames)
                message = session.deserialize(parts, content=False)
                texts = [bytes(part).decode("utf-8") for part in parts[1:5]]
                content = json.loads(texts[3])
            except Exception as error:  # a message the server itself could not read either
                self.log.warning("kernelwarden journal of %s: unreadable iopub message (%s)", kernel_id, error)
                return
            header = message["header"]
            buffers = [base64.b64encode(bytes(b)).decode("ascii") for b in parts[5:]]
            # Kept as the kernel's own (checked) JSON text: memory close to the bytes counted, nothing to re-encode.
            raw = '{"header":%s,"parent_header":%s,"metadata":%s,"content":%s,"buffers":%s,"channel":"iopub"}' % (
                texts[0],
                texts[1],
                texts[2],
                texts[3],
                json.dumps(buffers),
            )
            kept = {
                "header": header,
                "parent_header": message["parent_header"],
                "content": content if header.get("msg_type") == "status" else {},
                "raw": raw,
            }
            journal.append(kept, sum(len(part) for part in parts), session=header.get("session"))

        stream.on_recv(record)
        self.journals[kernel_id] = journal
        self.streams[kernel_id] = stream

    def close(self, kernel_id):
        self.journals.pop(kernel_id, None)
        stream = self.streams.pop(kernel_id, None)
        if stream is not None:
            try:
                stream.on_recv(None)
                stream.close(linger=0)
            except Exception:
                pass

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


def _entry_text(entry):
    generation, seq = entry.number
    return '{"n":[%d,%d],"msg":%s}' % (generation, seq, entry.message["raw"])


def page(entries, max_bytes):
    """The entries that fit in `max_bytes` of JSON (at least one), and whether some were left for the next read."""
    out = []
    used = 0
    for entry in entries:
        text = _entry_text(entry)
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
        if wait_for is not None:
            try:
                wait = min(MAX_WAIT_S, max(0.0, float(self.get_query_argument("wait_ms", "5000")) / 1000))
            except ValueError:
                raise web.HTTPError(400, "wait_ms must be a number")
            # The journal is a subscriber of its own: a client that already holds a live message waits until the
            # journal holds it too, so that what it reads next joins what it holds with nothing between.
            until = time.monotonic() + wait
            while journal.number_of(wait_for) is None and time.monotonic() < until:
                await asyncio.sleep(WAIT_POLL_S)
        answer = {"kernel_id": kernel_id, "last": list(journal.last), "lost": None}
        cell = self.get_query_argument("cell", None)
        after_msg_id = self.get_query_argument("after_msg_id", None)
        after = self.get_query_argument("after", None)
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
        self.finish(head[:-1] + ', "entries": [' + ",".join(texts) + "]}")


def _load_jupyter_server_extension(serverapp):
    from . import settings as current

    global journals
    km = serverapp.kernel_manager
    if journals is not None:
        journals.close_all()
    journals = KernelJournals(km, current.journal_max_bytes, current.journal_max_age_s, serverapp.log)

    start_kernel = km.start_kernel

    async def start_kernel_with_journal(*args, **kwargs):
        kernel_id = await ensure_async(start_kernel(*args, **kwargs))
        try:
            journals.open(kernel_id)
        except Exception as error:
            serverapp.log.warning("kernelwarden journal of %s not opened (%s)", kernel_id, error)
        journals.sweep()
        return kernel_id

    km.start_kernel = start_kernel_with_journal

    kernel_model = km.kernel_model

    def kernel_model_with_journal(kernel_id):
        model = kernel_model(kernel_id)
        if journals is not None and kernel_id in journals.journals:
            model["kernelwarden_journal"] = {
                "version": VERSION,
                "max_bytes": journals.max_bytes,
                "max_age_ms": int(journals.max_age_s * 1000),
            }
        return model

    km.kernel_model = kernel_model_with_journal
    PeriodicCallback(journals.sweep, SWEEP_MS).start()
    pattern = url_path_join(serverapp.base_url, r"/api/kernels/%s/journal" % _kernel_id_regex)
    serverapp.web_app.add_handlers(".*$", [(pattern, JournalHandler)])
    current.extension_loaded()
