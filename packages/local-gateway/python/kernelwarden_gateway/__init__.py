"""kernelwarden's embedded jupyter-server: the settings, kernel launch, start capacity, lifecycle and kernel journals
of the server that @kernelwarden/local-gateway runs, shipped with that npm package and loaded by the
jupyter_server_config.py it writes (from a copy in the gateway's private state directory).
"""

from . import capacity, fork_launch, launch, lifecycle, server_settings, settings

EXTENSION = "kernelwarden_gateway"


def _jupyter_server_extension_points():
    return [{"module": "kernelwarden_gateway.extension"}]


def configure(c, values):
    """Configures the server whose config is `c`. `values` (from LocalGateway) holds `instance`, `ipc_dir`,
    `kernel_log_dir`, `loaded_marker`, `max_concurrent_starts`, `max_kernels`, `start_queue_timeout_s`,
    `ready_wait_s`, and optionally `journal_max_bytes`, `journal_max_age_s`, `journal_enabled`, `launcher` (`fork` or
    `exec`), `launcher_preload` and `launcher_status_file`. The extension
    (extension.py) writes `instance` into `loaded_marker` once the server loaded it: a server that did not run all of
    this is refused."""
    server_settings.apply(c)
    capacity.install(
        capacity.Limits(
            max_starting=values["max_concurrent_starts"],
            max_kernels=values["max_kernels"],
            max_wait=values["start_queue_timeout_s"],
            ready_wait=values["ready_wait_s"],
        )
    )
    launch.install(launch.Settings(values["instance"], values["ipc_dir"], values["kernel_log_dir"]), c)
    lifecycle.install()
    fork_launch.install(
        fork_launch.Settings(
            mode=values.get("launcher", "fork"),
            preload=values.get("launcher_preload", ()),
            status_file=values.get("launcher_status_file"),
        )
    )
    settings.instance = values["instance"]
    settings.loaded_marker = values["loaded_marker"]
    settings.journal_max_bytes = values.get("journal_max_bytes", settings.journal_max_bytes)
    settings.journal_max_age_s = values.get("journal_max_age_s", settings.journal_max_age_s)
    settings.journal_enabled = bool(values.get("journal_enabled", True))
    c.ServerApp.jpserver_extensions.update({EXTENSION: True})
