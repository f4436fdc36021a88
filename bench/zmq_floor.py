#!/usr/bin/python3
"""The kernel's own floor: jupyter_client talking ZMQ straight to an ipykernel it starts itself (no gateway).

Run by bench/run.mjs with /usr/bin/python3 (the interpreter jupyter-server runs under). Every answer is one JSON
line on stdout; diagnostics go to stderr.

  zmq_floor.py roundtrip [--code 1] [--warmup 20]
      Starts a python3 kernel, runs the warm-up cells, prints {"ready": true}, then runs one cell per line read on
      stdin ("cell") and answers each with {"ms": <round trip>, "cpuMs": <this process's CPU time for it>}; "quit" (or end of input) shuts the kernel down and
      prints {"times": [...]} with every measured time. Lockstep lets the caller alternate it with other clients.

  zmq_floor.py output --code CODE [--reps 3] [--expect-bytes N] [--expect-lines N]
      Runs CODE --reps times and prints {"times": [...], "rssBaselineMB": [...], "rssPeakOverBaselineMB": [...],
      "bytes": [...], "inOrder": [...]} (peak RSS is VmHWM after resetting it through /proc/self/clear_refs).

A cell is complete when both its execute_reply and its `status: idle` have arrived.
"""

import argparse
import json
import signal
import sys
import time

from jupyter_client.manager import KernelManager

TIMEOUT_S = 300


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


class LineOrder:
    """Checks, chunk by chunk, that the stream text is the lines 0, 1, 2, ... in order (keeps O(1) memory)."""

    def __init__(self):
        self.carry = ""
        self.next = 0
        self.ok = True

    def feed(self, text):
        text = self.carry + text
        lines = text.split("\n")
        self.carry = lines.pop()
        for line in lines:
            if self.ok and line != str(self.next):
                self.ok = False
            self.next += 1


def run_cell(kc, code, on_text=None):
    start = time.perf_counter()
    msg_id = kc.execute(code, stop_on_error=False)
    while True:
        msg = kc.get_iopub_msg(timeout=TIMEOUT_S)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind = msg["msg_type"]
        if kind == "stream" and on_text is not None:
            on_text(msg["content"]["text"])
        elif kind == "status" and msg["content"]["execution_state"] == "idle":
            break
    while True:
        reply = kc.get_shell_msg(timeout=TIMEOUT_S)
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    return (time.perf_counter() - start) * 1000.0, reply


def start_kernel():
    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    return km, kc


def stop_kernel(km, kc):
    try:
        kc.stop_channels()
    finally:
        km.shutdown_kernel(now=False)


def roundtrip(args):
    km, kc = start_kernel()
    try:
        for _ in range(args.warmup):
            run_cell(kc, args.code)
        emit({"ready": True})
        times = []
        for line in sys.stdin:
            command = line.strip()
            if command == "quit":
                break
            if command == "cell":
                cpu0 = time.process_time()
                ms, reply = run_cell(kc, args.code)
                cpu_ms = (time.process_time() - cpu0) * 1000.0
                if reply["content"].get("status") != "ok":
                    raise RuntimeError("cell failed: %r" % reply["content"])
                times.append(ms)
                emit({"ms": ms, "cpuMs": cpu_ms})
        emit({"times": times})
    finally:
        stop_kernel(km, kc)


def output(args):
    km, kc = start_kernel()
    try:
        run_cell(kc, "1")
        result = {"times": [], "rssBaselineMB": [], "rssPeakOverBaselineMB": [], "bytes": [], "inOrder": []}
        for _ in range(args.reps):
            received = [0]
            order = LineOrder()

            def on_text(text):
                received[0] += len(text)
                if args.expect_lines:
                    order.feed(text)

            baseline = status_kb("VmRSS")
            reset_peak_rss()
            ms, reply = run_cell(kc, args.code, on_text)
            peak = status_kb("VmHWM")
            if reply["content"].get("status") != "ok":
                raise RuntimeError("cell failed: %r" % reply["content"])
            result["times"].append(ms)
            result["rssBaselineMB"].append(baseline / 1024)
            result["rssPeakOverBaselineMB"].append(max(0, peak - baseline) / 1024)
            result["bytes"].append(received[0])
            if args.expect_lines:
                result["inOrder"].append(order.ok and order.next == args.expect_lines)
        emit(result)
    finally:
        stop_kernel(km, kc)


def stop_on_sigterm(signum, frame):
    # A KeyboardInterrupt unwinds through the `finally` that shuts the kernel down.
    raise KeyboardInterrupt


def main():
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["roundtrip", "output"])
    parser.add_argument("--code", default="1")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--expect-lines", type=int, default=0)
    args = parser.parse_args()
    if args.mode == "roundtrip":
        roundtrip(args)
    else:
        output(args)


if __name__ == "__main__":
    main()
