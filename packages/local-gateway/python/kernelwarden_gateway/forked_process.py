"""The handle the server keeps of a kernel forked by a launcher: what Popen is to an exec'd kernel (fork_launch.py)."""

import os
import select
import signal
import subprocess
import time


class ForkedProcess:
    """What Popen is to an exec'd kernel, for a kernel forked by a launcher (whose child it is)."""

    stdin = stdout = stderr = None

    def __init__(self, launcher, pid, args, holder):
        self.launcher = launcher
        self.pid = pid
        self._holder = holder
        self.args = args
        self.returncode = None
        self._pidfd = None
        if hasattr(os, "pidfd_open"):
            try:
                self._pidfd = os.pidfd_open(pid)
            except OSError:
                self._pidfd = None

    def _gone(self):
        """Whether the process is gone (when its launcher cannot tell any more)."""
        if self._pidfd is not None:
            return bool(select.select([self._pidfd], [], [], 0)[0])
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        return False

    def _settle(self, code):
        self.returncode = code
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        return code

    def poll(self):
        if self.returncode is not None:
            return self.returncode
        status = self._holder[0]
        if status is not None:
            return self._settle(status)
        if not self.launcher.usable() and self._gone():
            # Its launcher died first (taking it along: PDEATHSIG): no status to relay.
            return self._settle(-signal.SIGKILL)
        return None

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.005)
        return self.returncode

    def send_signal(self, signum):
        if self.poll() is not None:
            return
        if self._pidfd is not None and hasattr(signal, "pidfd_send_signal"):
            try:
                signal.pidfd_send_signal(self._pidfd, signum)
            except ProcessLookupError:
                pass
            return
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            pass

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)
