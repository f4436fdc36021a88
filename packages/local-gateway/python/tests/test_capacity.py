import asyncio
import time

from traitlets import HasTraits, Unicode

from kernelwarden_gateway import capacity


class FakeKernels:
    def __init__(self, ids=()):
        self.ids = list(ids)

    def list_kernel_ids(self):
        return list(self.ids)


def run(coro):
    return asyncio.run(coro)


def test_limits_are_at_least_one():
    limits = capacity.Limits(0, -3, 1, 2)
    assert (limits.max_starting, limits.max_kernels, limits.max_wait, limits.ready_wait) == (1, 1, 1.0, 2.0)


def test_requested_wait_takes_a_shorter_non_negative_number_only():
    assert capacity.requested_wait({}, 120) == 120
    assert capacity.requested_wait({"kernelwarden_wait_ms": 1500}, 120) == 1.5
    assert capacity.requested_wait({"kernelwarden_wait_ms": 0}, 120) == 0
    assert capacity.requested_wait({"kernelwarden_wait_ms": 500_000}, 120) == 120
    assert capacity.requested_wait({"kernelwarden_wait_ms": -1}, 120) == 120
    assert capacity.requested_wait({"kernelwarden_wait_ms": True}, 120) == 120
    assert capacity.requested_wait({"kernelwarden_wait_ms": "5"}, 120) == 120


def test_blocked_names_what_holds_a_start():
    gate = capacity.Gate(capacity.Limits(2, 3, 1, 1))
    assert gate.blocked(FakeKernels()) is None
    gate.starting = 2
    assert gate.blocked(FakeKernels()) == "busy"
    gate.starting = 1
    assert gate.blocked(FakeKernels(["a"])) is None
    assert gate.blocked(FakeKernels(["a", "b"])) == "at-capacity"


def test_starts_are_served_first_come_first_served_within_the_slots():
    async def scenario():
        gate = capacity.Gate(capacity.Limits(1, 10, 5, 1))
        km = FakeKernels()
        order = []

        async def create(name):
            ticket = capacity.Ticket(None)
            assert await gate.enter(km, ticket, 5) is None
            order.append(name)
            await asyncio.sleep(0.01)
            gate.leave()

        tasks = [asyncio.ensure_future(create(i)) for i in range(5)]
        await asyncio.gather(*tasks)
        assert order == [0, 1, 2, 3, 4]
        assert gate.starting == 0
        assert gate.queue == []

    run(scenario())


def test_a_create_that_waits_its_whole_deadline_is_told_busy_or_at_capacity():
    async def scenario():
        gate = capacity.Gate(capacity.Limits(1, 10, 5, 1))
        gate.starting = 1
        assert await gate.enter(FakeKernels(), capacity.Ticket(None), 0.05) == "busy"
        gate.starting = 0
        assert await gate.enter(FakeKernels(["k"] * 10), capacity.Ticket(None), 0.05) == "at-capacity"
        assert gate.queue == []

    run(scenario())


def test_a_kernel_going_away_lets_a_create_past_the_limit_in():
    async def scenario():
        gate = capacity.Gate(capacity.Limits(1, 1, 5, 1))
        km = FakeKernels(["k"])
        waiting = asyncio.ensure_future(gate.enter(km, capacity.Ticket(None), 5))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        km.ids = []
        assert await asyncio.wait_for(waiting, 2) is None
        assert gate.starting == 1

    run(scenario())


def test_a_withdrawn_or_gone_create_leaves_the_queue():
    async def scenario():
        gate = capacity.Gate(capacity.Limits(1, 10, 5, 1))
        gate.starting = 1
        cancelled = capacity.Ticket("id")
        gone = capacity.Ticket(None)
        a = asyncio.ensure_future(gate.enter(FakeKernels(), cancelled, 5))
        b = asyncio.ensure_future(gate.enter(FakeKernels(), gone, 5))
        await asyncio.sleep(0.02)
        cancelled.cancelled = True
        gone.gone = True
        gate.wake()
        assert await asyncio.wait_for(a, 2) == "withdrawn"
        assert await asyncio.wait_for(b, 2) == "withdrawn"
        assert gate.queue == []

    run(scenario())


def test_install_replaces_create_and_delete_once_and_takes_new_limits():
    capacity.install(capacity.Limits(2, 5, 10, 60))
    handlers = capacity.handlers
    assert handlers.MainKernelHandler._kernelwarden_capacity
    assert handlers.MainKernelHandler.post is capacity._post
    assert handlers.KernelHandler.delete is capacity._patched_delete
    gate = capacity.gate
    capacity.install(capacity.Limits(3, 6, 10, 60))
    assert capacity.gate is gate
    assert gate.limits.max_starting == 3


class FakeKernel:
    def __init__(self, state):
        self.execution_state = state


class FakeManager:
    def __init__(self, kernels):
        self.kernels = kernels

    def get_kernel(self, kernel_id):
        return self.kernels[kernel_id]


def test_a_kernel_that_answered_kernel_info_is_no_longer_recorded_as_starting():
    kernels = {"a": FakeKernel("starting"), "b": FakeKernel("busy"), "c": FakeKernel("idle")}
    km = FakeManager(kernels)
    for kernel_id in ("a", "b", "c", "gone"):
        capacity._answered(km, kernel_id)
    assert [kernels[k].execution_state for k in ("a", "b", "c")] == ["idle", "busy", "idle"]


class Provisioner:
    def __init__(self, pid):
        self.pid = pid


class TraitKernel(HasTraits):
    # jupyter_server 2's kernels: execution_state is a trait, set from the status messages its subscription receives.
    execution_state = Unicode(None, allow_none=True)

    def __init__(self, pid):
        super().__init__()
        self.provisioner = Provisioner(pid)
        self.execution_state = "starting"


def test_a_process_that_answered_is_not_starting_again_when_its_own_starting_status_comes_late_but_a_new_one_is():
    kernel = TraitKernel(100)
    capacity._answered(FakeManager({"a": kernel}), "a")
    assert kernel.execution_state == "idle"
    kernel.execution_state = "busy"
    kernel.execution_state = "starting"  # the first process's own status, received after its reply
    assert kernel.execution_state == "idle"
    kernel.provisioner.pid = 101  # restarted: a new process starts as any
    kernel.execution_state = "starting"
    assert kernel.execution_state == "starting"
    capacity._answered(FakeManager({"a": kernel}), "a")
    assert kernel.execution_state == "idle"
    kernel.execution_state = "starting"
    assert kernel.execution_state == "idle"


def test_a_channels_socket_waits_for_the_create_to_see_its_kernel_info_reply_and_no_longer_than_asked():
    async def scenario():
        started = time.monotonic()
        await capacity.held_start_ended("never-held", at_most=5)
        assert time.monotonic() - started < 1
        ended = capacity._holds["k"] = asyncio.Event()
        waiter = asyncio.ensure_future(capacity.held_start_ended("k", at_most=5))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        ended.set()
        await asyncio.wait_for(waiter, 2)
        capacity._holds["k"] = asyncio.Event()
        started = time.monotonic()
        await capacity.held_start_ended("k", at_most=0.1)
        assert time.monotonic() - started >= 0.1
        del capacity._holds["k"]

    run(scenario())


def test_the_kernel_info_a_create_saw_is_kept_for_the_first_websocket_but_an_error_or_an_earlier_one_is_not():
    kernels = {"a": FakeKernel("starting"), "b": FakeKernel("starting"), "c": FakeKernel("starting")}
    earlier = object()
    kernels["c"]._kernel_info_future = earlier
    km = FakeManager(kernels)
    info = {"status": "ok", "protocol_version": "5.3", "language_info": {"name": "python"}}
    capacity._answered(km, "a", info)
    capacity._answered(km, "b", {"status": "error"})
    capacity._answered(km, "c", info)
    assert kernels["a"]._kernel_info_future.result(timeout=0) == info
    assert not hasattr(kernels["b"], "_kernel_info_future")
    assert kernels["c"]._kernel_info_future is earlier
