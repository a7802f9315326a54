"""A free port stays free for the server it was chosen for (workflows/ports.py).

Broken build caught: a port chosen by binding port 0 and closing, which the kernel hands to the
next bind(0) at once (the dev server then fails to start, or a probe finds another server)."""

from __future__ import annotations

import errno
import socket

import pytest

from workflows.ports import LOOPBACK, free_port


def test_a_free_port_is_kept_from_other_binds_but_a_server_can_listen_on_it() -> None:
    port = free_port()
    with socket.socket() as other, pytest.raises(OSError) as refused:
        other.bind((LOOPBACK, port))  # what bind(0) would meet: the port is not handed out
    assert refused.value.errno == errno.EADDRINUSE
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((LOOPBACK, port))
        server.listen()
        with socket.create_connection((LOOPBACK, port), timeout=5):
            pass
