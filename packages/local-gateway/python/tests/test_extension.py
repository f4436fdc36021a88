import json

import pytest

from kernelwarden_gateway import extension
from kernelwarden_gateway import recorder as recorder_module
from kernelwarden_gateway.journal import Journal


def fill(journal, count):
    for i in range(count):
        header = json.dumps({"msg_id": "m%d" % i, "msg_type": "stream"}).encode()
        frames = (header, b"{}", b"{}", json.dumps({"text": "x" * 50}).encode(), b"\x00\x01")
        journal.append("m%d" % i, "stream", None, "s", frames)


def test_a_page_is_valid_json_holding_the_numbers_and_the_kernels_own_message_text():
    journal = Journal()
    fill(journal, 3)
    texts, more = extension.page(journal.after((0, 0))[0], 1 << 20)
    assert not more
    entries = json.loads(b"[" + b",".join(texts) + b"]")
    assert [e["n"] for e in entries] == [[1, 1], [1, 2], [1, 3]]
    assert entries[2]["msg"]["header"]["msg_id"] == "m2"
    assert entries[2]["msg"]["buffers"] == ["AAE="]


def test_pages_stop_at_their_byte_bound_but_always_hold_one_entry():
    journal = Journal()
    fill(journal, 10)
    entries = journal.after((0, 0))[0]
    texts, more = extension.page(entries, 450)
    assert more
    assert 1 <= len(texts) < 10
    assert sum(len(t) + 1 for t in texts) <= 450 + 1
    texts, more = extension.page(entries, 1)
    assert (len(texts), more) == (1, True)


@pytest.mark.parametrize(("text", "number"), [("0.0", (0, 0)), ("2.15", (2, 15))])
def test_numbers_are_generation_dot_seq(text, number):
    assert extension._number(text) == number


@pytest.mark.parametrize("text", ["", "1", "a.b", "1.-2", "-1.0"])
def test_anything_else_is_not_a_number(text):
    with pytest.raises(ValueError):
        extension._number(text)


class FakeApp:
    def __init__(self):
        self.handlers = []
        self.base_url = "/"
        self.log = None
        km = type("KM", (), {})()
        km.start_kernel = "start"
        km.restart_kernel = "restart"
        km.kernel_model = "model"
        self.kernel_manager = km
        self.web_app = type("Web", (), {"add_handlers": lambda _, host, handlers: self.handlers.extend(handlers)})()


def test_a_server_without_journals_serves_kernels_as_jupyter_server_does(tmp_path, monkeypatch):
    from kernelwarden_gateway import settings

    monkeypatch.setattr(settings, "journal_enabled", False)
    monkeypatch.setattr(settings, "instance", "abc")
    monkeypatch.setattr(settings, "loaded_marker", str(tmp_path / "loaded"))
    app = FakeApp()
    extension._load_jupyter_server_extension(app)
    km = app.kernel_manager
    assert (km.start_kernel, km.restart_kernel, km.kernel_model) == ("start", "restart", "model")
    assert app.handlers == []
    assert extension.journals is None
    assert (tmp_path / "loaded").read_text() == "abc"


def test_a_recorder_drains_a_kernels_iopub_in_batches_and_keeps_its_signed_frames():
    import asyncio

    import zmq
    from jupyter_client.session import Session

    session = Session(key=b"secret")
    context = zmq.Context.instance()
    pub = context.socket(zmq.PUB)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    kernel = type("Kernel", (), {"session": session, "_make_url": lambda _, channel: "tcp://127.0.0.1:%d" % port})()
    forged = Session(key=b"other")

    async def run():
        journal = Journal()
        recorder = recorder_module.Recorder(kernel, journal, Log(), "k")
        try:
            sent = 0
            # Nudge until the subscription is through (as `until` does with kernel_info requests).
            while recorder.heard == 0 and sent < 200:
                session.send(pub, "status", {"execution_state": "busy"}, parent={"msg_id": "p"})
                sent += 1
                await asyncio.sleep(0.01)
            assert recorder.heard > 0
            before = recorder.heard
            forged.send(pub, "stream", {"name": "stdout", "text": "forged"}, parent={"msg_id": "p"})
            for i in range(2500):
                session.send(pub, "stream", {"name": "stdout", "text": "%d\n" % i}, parent={"msg_id": "p"})
            session.send(pub, "status", {"execution_state": "idle"}, parent={"msg_id": "p"})
            for _ in range(500):
                if recorder.heard >= before + 2501:
                    break
                await asyncio.sleep(0.01)
            entries = journal.cell("p")[0]
            texts = [json.loads(e.frames[3]).get("text") for e in entries if e.msg_type == "stream"]
            assert texts == ["%d\n" % i for i in range(2500)]
            assert journal.cell("p")[2] is True
            return recorder
        finally:
            recorder.close()

    recorder = asyncio.run(run())
    assert recorder.closed
    # The forged message (another key) was refused, said, and not numbered.
    assert any("bad signature" in str(w[-1]) for w in recorder.log.warnings)
    pub.close(linger=0)


def test_a_recorder_rejoins_a_kernel_whose_process_was_replaced_at_once(tmp_path):
    """An auto-restarted kernel binds the same ipc paths: the subscription reconnects within a few ms (ZMQ's own
    default waits 100-200 ms between attempts, longer than a forked kernel takes to serve a cell)."""
    import asyncio

    import zmq
    from jupyter_client.session import Session

    session = Session(key=b"secret")
    context = zmq.Context.instance()
    url = "ipc://%s" % (tmp_path / "k-2")
    kernel = type("Kernel", (), {"session": session, "_make_url": lambda _, channel: url})()

    async def run():
        pub = context.socket(zmq.PUB)
        pub.bind(url)
        journal = Journal()
        recorder = recorder_module.Recorder(kernel, journal, Log(), "k")
        try:
            assert recorder.socket.reconnect_ivl == recorder_module.RECONNECT_MS < 100
            for _ in range(500):
                if recorder.heard:
                    break
                session.send(pub, "status", {"execution_state": "idle"}, parent={"msg_id": "old"})
                await asyncio.sleep(0.01)
            assert recorder.heard > 0
            pub.close(linger=0)  # the kernel's process dies
            await asyncio.sleep(0.05)
            replaced = Session(key=b"secret")  # the new process: a new session, the same paths
            pub = context.socket(zmq.PUB)
            pub.bind(url)
            for _ in range(500):
                if journal.generation == 2:
                    break
                replaced.send(pub, "status", {"execution_state": "busy"}, parent={"msg_id": "new"})
                await asyncio.sleep(0.01)
            assert journal.generation == 2
            assert journal.session == replaced.session
        finally:
            recorder.close()
            pub.close(linger=0)

    asyncio.run(run())


def test_a_replaced_process_is_heard_only_once_the_journal_recorded_a_message_of_another_session():
    journal = Journal()
    recorder = object.__new__(recorder_module.Recorder)
    recorder.journal = journal
    recorder.replaced_session = None
    assert not recorder.hears_current()
    journal.append("m1", "status", None, "old", (b"{}", b"{}", b"{}", b"{}"))
    assert recorder.hears_current()
    recorder.replacing()  # the server's auto-restart begins
    assert not recorder.hears_current()
    journal.append("m2", "status", None, "old", (b"{}", b"{}", b"{}", b"{}"))
    assert not recorder.hears_current()
    journal.append("m3", "status", None, "new", (b"{}", b"{}", b"{}", b"{}"))
    assert recorder.hears_current()


def test_the_channels_handler_this_server_routes_opens_only_after_the_journal_wait_and_without_nagle(monkeypatch):
    import asyncio
    import importlib

    routed = set()
    for name in ("jupyter_server.services.kernels.websocket", "jupyter_server.services.kernels.handlers"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        routed |= {entry[1] for entry in getattr(module, "default_handlers", []) if "channels" in entry[0]}
    assert routed and routed <= set(extension._channels_handlers())

    order = []

    class Handler:
        kernel_id = "k1"

        async def pre_get(self):
            order.append("prepared")

        def set_nodelay(self, value):
            order.append("nodelay %s" % value)

        def open(self, kernel_id):
            order.append("open " + kernel_id)

    async def wait(kernel_id):
        order.append("journal heard " + kernel_id)

    monkeypatch.setattr(extension, "_channels_handlers", lambda: [Handler])
    try:
        extension._gate_channels(wait)
        extension._gate_channels(wait)  # a second load wraps nothing twice
        asyncio.run(Handler().pre_get())
        assert order == ["prepared", "journal heard k1"]
        order.clear()
        Handler().open("k1")  # Nagle's algorithm is off before jupyter-server's own open runs
        assert order == ["nodelay True", "open k1"]
        extension._gate_channels(None)  # a server without journals: the socket opens as jupyter-server opens it
        order.clear()
        asyncio.run(Handler().pre_get())
        assert order == ["prepared"]
    finally:
        extension._gate_channels(None)


class Log:
    def __init__(self):
        self.warnings = []

    def warning(self, *args):
        self.warnings.append(args)
