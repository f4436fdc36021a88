// The big-output cells: each client runs them in its own child process so its peak RSS is its own.
export const OUTPUT_SCENARIOS = {
  '20mb': {
    title: '20 MB cell',
    code: "for i in range(200000): print('x'*99)",
    expectBytes: 20_000_000,
    expectLines: 0,
    clients: ['kernelwarden', 'jupyterlab', 'minimal'],
    zmqFloor: true,
    timeoutMs: 120_000,
  },
  lines: {
    title: '200,000-line flushed cell',
    code: 'for i in range(200000): print(i, flush=True)',
    expectBytes: 0,
    expectLines: 200_000,
    // ipykernel hands every flush to its IO thread and waits for it: the kernel, not the client, sets the pace
    // (~2,000 lines/s through jupyter_client over ZMQ on an idle 2-core machine, so ~100 s per run). One run per
    // client, and no ZMQ-floor run, keep the whole bench near 10 minutes.
    reps: 1,
    clients: ['jupyterlab', 'kernelwarden'],
    zmqFloor: false,
    timeoutMs: 180_000,
  },
};
