/**
 * The embedded server's kernel launch is done by the `kernelwarden_gateway` Python package shipped with this one
 * (`python/kernelwarden_gateway/launch.py`, `ipykernel_boot.py`, `lifecycle.py`):
 *
 * - **ZMQ over ipc, never TCP.** A kernel's channels are Unix sockets in a directory of its own under the private
 *   `ipcDir` (0700), so no other local user — and no isolated kernel, which sees only its own directory — can
 *   connect to them (iopub needs no key: over TCP on 127.0.0.1 anyone could read every cell's code and output).
 * - **Each kernel's stdout and stderr go to a log of its own** (`<kernelLogDir>/<kernel id>.log`), never to the
 *   server's log: a kernel can neither read nor forge the server's records through the descriptors it inherits.
 * - **An IPython kernel's iopub never drops output.** `python -m ipykernel_launcher …` is launched as
 *   `python -c <boot> …`, where the boot makes the kernel's PUB/XPUB sockets unbounded before it binds them, then
 *   runs `ipykernel_launcher` as `-m` would.
 * - **Nothing in a kernel's working directory runs at its launch.** The IPython boot runs with `PYTHONSAFEPATH=1`
 *   (taken out of the environment again once it runs); the working directory goes on `sys.path` once the kernel is
 *   initialised, where IPython puts it. Every R kernel (an argv running `IRkernel::main()`) starts with
 *   `--no-init-file --no-environ --no-restore`.
 * - **ipykernel's fork-output pipe is out of other users' reach**: an ipc socket in the kernel's own private
 *   directory; a message without the pipe's random id is dropped, never printed.
 * - **Every process a kernel starts carries a marker** (`KERNELWARDEN_KERNEL=<instance>:<kernel id>`); when the
 *   server cleans a kernel up (shutdown, kill, restart, death) it kills every process still carrying it, and removes
 *   the kernel's own cgroups (`kw-<tag>-<kernel id>`).
 * - **Python kernels are forked** from a launcher of their interpreter that has already imported ipykernel
 *   (`python/kernelwarden_gateway/fork_launch.py`, `forkserver.py`; the README's Fast starts): each gets the treatment
 *   above, its own session, environment (in `/proc` too), descriptors and random state; isolated kernelspecs, R, and
 *   any start the launcher cannot reproduce are exec'd.
 * - **Shutdowns are quick**: a kernel's exit is polled every 10 ms; a DELETE returns once the kernel was asked to
 *   shut down (the server waits for its exit and cleans it up in the background; restarts and the server's own stop
 *   wait); jupyter_client's 10 ms settling sleep is left out.
 */

/**
 * The environment variable naming a LocalGateway kernel's own ipc directory: a sandbox launcher binds that directory
 * (and nothing else of the ipc base) into the sandbox, so an isolated kernel's sockets are reachable by the server.
 */
export const KERNEL_IPC_DIR_ENV = 'KERNELWARDEN_KERNEL_IPC_DIR';

/** Longest ipc base directory: `<base>/<36-char kernel id>/k-<port>` must fit a Unix socket path (107 bytes). */
export const MAX_IPC_BASE_LENGTH = 64;
