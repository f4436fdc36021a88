"""kernelwarden's embedded jupyter-server: the settings, kernel launch, start capacity and lifecycle of the server
that @kernelwarden/local-gateway runs, shipped with that npm package and loaded by the jupyter_server_config.py it
writes (from a copy in the gateway's private state directory).
"""

from . import capacity, fork_launch, launch, lifecycle, server_settings


def configure(c, settings):
    """Configures the server whose config is `c`. `settings` (from LocalGateway) holds `instance`, `ipc_dir`,
    `kernel_log_dir`, `loaded_marker`, `max_concurrent_starts`, `max_kernels`, `start_queue_timeout_s`,
    `ready_wait_s` and, optional, `launcher` (`fork` or `exec`), `launcher_preload` and `launcher_status_file`.
    Writes `instance` into `loaded_marker` last: a server that did not run all of this is refused."""
    server_settings.apply(c)
    capacity.install(
        capacity.Limits(
            max_starting=settings["max_concurrent_starts"],
            max_kernels=settings["max_kernels"],
            max_wait=settings["start_queue_timeout_s"],
            ready_wait=settings["ready_wait_s"],
        )
    )
    launch.install(launch.Settings(settings["instance"], settings["ipc_dir"], settings["kernel_log_dir"]), c)
    lifecycle.install()
    fork_launch.install(
        fork_launch.Settings(
            mode=settings.get("launcher", "fork"),
            preload=settings.get("launcher_preload", ()),
            status_file=settings.get("launcher_status_file"),
        )
    )
    with open(settings["loaded_marker"], "w") as marker:
        marker.write(settings["instance"])
