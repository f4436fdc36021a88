"""This server run's settings that the extension reads when jupyter-server loads it (configure() sets them)."""

from .journal import DEFAULT_MAX_AGE_S, DEFAULT_MAX_BYTES

instance = None
loaded_marker = None
journal_max_bytes = DEFAULT_MAX_BYTES
journal_max_age_s = DEFAULT_MAX_AGE_S
# False turns the journals off: kernels are served as by a stock jupyter-server.
journal_enabled = True


def extension_loaded():
    """Writes `instance` into the loaded marker: the server ran the whole configuration and loaded the extension."""
    if loaded_marker:
        with open(loaded_marker, "w") as marker:
            marker.write(instance)
