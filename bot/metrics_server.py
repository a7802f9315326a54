"""A Prometheus listener on its own address (a thread of prometheus_client's HTTP server): the
worker's metrics, and the web app's when EVALBOT_METRICS_APP_ADDRESS is set. No token on these:
bind them to a private interface (docs/deploy.md, "Metrics")."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from prometheus_client import start_http_server
from prometheus_client.registry import Collector


class MetricsAddressError(RuntimeError):
    """The metrics address cannot be listened on; `str()` is one sentence with the fix."""


def split_address(address: str) -> tuple[str, int]:
    """`host:port` (validated by the settings) as (host, port); `[::1]:9464` as ('::1', 9464)."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


@contextlib.contextmanager
def serving(address: str, registry: Collector, setting: str) -> Iterator[None]:
    """Serve `registry` at http://address/metrics while the block runs; `setting` names the
    variable to change when the address is taken."""
    host, port = split_address(address)
    try:
        server, thread = start_http_server(port, host, registry)
    except OSError as error:
        raise MetricsAddressError(
            f"cannot serve metrics on {address} ({error.strerror or error}); set {setting} to a "
            "free host:port"
        ) from None
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
