import asyncio

from traitlets.config import Config

import kernelwarden_gateway
from kernelwarden_gateway import lifecycle


def settings(tmp_path):
    return {
        "instance": "0123456789abcdef",
        "ipc_dir": str(tmp_path / "ipc"),
        "kernel_log_dir": str(tmp_path / "logs"),
        "loaded_marker": str(tmp_path / "loaded"),
        "max_concurrent_starts": 2,
        "max_kernels": 7,
        "start_queue_timeout_s": 120.0,
        "ready_wait_s": 60.0,
    }


def test_configure_applies_everything_and_loads_the_extension_which_writes_the_marker(tmp_path):
    c = Config()
    kernelwarden_gateway.configure(c, settings(tmp_path))
    assert not (tmp_path / "loaded").exists()
    assert c.ServerApp.jpserver_extensions.to_dict()["update"] == {"kernelwarden_gateway": True}
    assert kernelwarden_gateway._jupyter_server_extension_points() == [{"module": "kernelwarden_gateway.extension"}]
    kernelwarden_gateway.settings.extension_loaded()
    assert (tmp_path / "loaded").read_text() == "0123456789abcdef"
    assert c.KernelManager.transport == "ipc"
    assert kernelwarden_gateway.capacity.gate.limits.max_kernels == 7
    assert kernelwarden_gateway.launch._settings.ipc_dir == str(tmp_path / "ipc")
    km = lifecycle._manager.KernelManager
    assert km._kernelwarden_wait_patched or not hasattr(km, "_async_wait")
    assert km._kernelwarden_retire_patched
    assert km._kernelwarden_pending_patched


def test_the_start_wrapper_keeps_jupyter_clients_bookkeeping_without_the_sleep():
    calls = []

    class Log:
        def exception(self, *args):
            calls.append(("logged",))

    class Manager:
        _attempted_start = True
        _ready = None
        log = Log()

    async def method(self, value):
        calls.append(("ran", value))
        return value * 2

    def decorated():
        raise AssertionError("the decorator itself is not called")

    decorated.__wrapped__ = method
    quick = lifecycle.without_settle_sleep(decorated)
    assert quick.__wrapped__ is method

    async def scenario():
        manager = Manager()
        assert await quick(manager, 21) == 42
        assert manager._ready.done() and manager._ready.result() is None

    asyncio.run(scenario())
    assert calls == [("ran", 21)]


def test_the_start_wrapper_leaves_a_method_without_a_wrapped_one_alone():
    def plain():
        pass

    assert lifecycle.without_settle_sleep(plain) is plain
