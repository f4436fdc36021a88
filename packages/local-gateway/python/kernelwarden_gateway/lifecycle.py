"""Faster kernel shutdowns and restarts in the embedded server (patches of jupyter_client's KernelManager).

- A kernel's exit is polled every 10 ms instead of 100 ms (KernelManager._async_wait, where it exists): a shutdown
  returns as soon as the kernel is gone.
- A shutdown (DELETE) returns once the kernel was asked to shut down (after its interrupt, as jupyter does); the
  server waits for its exit in the background (SIGTERM, then SIGKILL after its shutdown wait time) and cleans it up
  then (marker sweep, ipc directory, cgroups). Restarts wait for the old process, and the server's own stop waits
  for every kernel, retiring ones included.
- A DELETE that arrives while the server restarts a dead kernel (its auto-restart) waits for the restart to end, then
  shuts the kernel down: jupyter_client would fail it (500, "Exception is not set") and leave the kernel listed.
- jupyter_client's "pending state" wrapper of a kernel's start and shutdown ends with a 10 ms sleep (there for its
  own tests); the same wrapper runs here without it.
"""

import asyncio

import jupyter_client.manager as _manager
import jupyter_client.multikernelmanager as _multi

POLL_INTERVAL = 0.01

retiring = set()
_server_stopping = False
_original = {}


async def _patched_async_wait(self, pollinterval=0.1):
    return await _original["async_wait"](self, pollinterval=min(pollinterval, POLL_INTERVAL))


async def _retire(km, waittime, pollinterval):
    try:
        await _original["finish_shutdown"](km, waittime=waittime, pollinterval=pollinterval, restart=False)
    finally:
        await _original["cleanup_resources"](km, restart=False)


async def _patched_finish_shutdown(self, waittime=None, pollinterval=0.1, restart=False):
    if restart or _server_stopping:
        return await _original["finish_shutdown"](self, waittime=waittime, pollinterval=pollinterval, restart=restart)
    self._kw_retired = True
    task = asyncio.ensure_future(_retire(self, waittime, pollinterval))
    retiring.add(task)
    task.add_done_callback(retiring.discard)


async def _patched_cleanup_resources(self, restart=False):
    if restart or not getattr(self, "_kw_retired", False):
        return await _original["cleanup_resources"](self, restart=restart)


RESTART_WAIT = 60.0


async def _patched_mkm_shutdown_kernel(self, kernel_id, now=False, restart=False):
    deadline = asyncio.get_running_loop().time() + RESTART_WAIT
    while kernel_id not in getattr(self, "_pending_kernels", {}):
        try:
            ready = self.get_kernel(kernel_id).ready
        except KeyError:
            break
        if ready is None or ready.done():
            break
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            break
        waitable = ready if isinstance(ready, asyncio.Future) else asyncio.wrap_future(ready)
        try:
            await asyncio.wait_for(asyncio.shield(waitable), remaining)
        except Exception:
            break
    return await _original["mkm_shutdown_kernel"](self, kernel_id, now=now, restart=restart)


async def _patched_shutdown_all(self, now=False):
    global _server_stopping
    _server_stopping = True
    await _original["shutdown_all"](self, now=now)
    if retiring:
        await asyncio.gather(*list(retiring), return_exceptions=True)


def without_settle_sleep(decorated):
    """jupyter_client's in_pending_state wrapper of `decorated`'s own method, without its closing 10 ms sleep."""
    method = getattr(decorated, "__wrapped__", None)
    if method is None:
        return decorated

    async def wrapper(self, *args, **kwargs):
        if self._attempted_start or not self._ready:
            self._ready = _manager._get_future()
        try:
            out = await method(self, *args, **kwargs)
            if getattr(self, "owns_kernel", True):
                self._ready.set_result(None)
            return out
        except Exception as e:
            self._ready.set_exception(e)
            self.log.exception(self._ready.exception())
            raise e

    wrapper.__wrapped__ = method
    return wrapper


def install():
    """Patches KernelManager and AsyncMultiKernelManager, once per process."""
    km = _manager.KernelManager
    if hasattr(km, "_async_wait") and not getattr(km, "_kernelwarden_wait_patched", False):
        _original["async_wait"] = km._async_wait
        km._async_wait = _patched_async_wait
        km._kernelwarden_wait_patched = True

    if not getattr(km, "_kernelwarden_retire_patched", False):
        _original["finish_shutdown"] = km._async_finish_shutdown
        _original["cleanup_resources"] = km._async_cleanup_resources
        _original["shutdown_all"] = _multi.AsyncMultiKernelManager.shutdown_all
        km._async_finish_shutdown = _patched_finish_shutdown
        km._async_cleanup_resources = _patched_cleanup_resources
        _manager.AsyncKernelManager.finish_shutdown = _patched_finish_shutdown
        _manager.AsyncKernelManager.cleanup_resources = _patched_cleanup_resources
        _multi.AsyncMultiKernelManager.shutdown_all = _patched_shutdown_all
        km._kernelwarden_retire_patched = True

    mkm = _multi.MultiKernelManager
    if not getattr(mkm, "_kernelwarden_restart_wait_patched", False):
        original = mkm._async_shutdown_kernel
        _original["mkm_shutdown_kernel"] = original
        mkm._async_shutdown_kernel = _patched_mkm_shutdown_kernel
        if _multi.AsyncMultiKernelManager.__dict__.get("shutdown_kernel") is original:
            _multi.AsyncMultiKernelManager.shutdown_kernel = _patched_mkm_shutdown_kernel
        mkm._kernelwarden_restart_wait_patched = True

    if not getattr(km, "_kernelwarden_pending_patched", False):
        for name, alias in (("_async_start_kernel", "start_kernel"), ("_async_shutdown_kernel", "shutdown_kernel")):
            quick = without_settle_sleep(getattr(km, name))
            setattr(km, name, quick)
            setattr(_manager.AsyncKernelManager, alias, quick)
        km._kernelwarden_pending_patched = True
