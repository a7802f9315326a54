"""What the fake HTTP services share: a loopback server on a free port, served from a daemon thread.

class FakeThing(FakeHttpServer):
    def handler_class(self) -> type[BaseHTTPRequestHandler]: ...

server = FakeThing().start()    # listening on 127.0.0.1:<free port>
server.root                     # "http://127.0.0.1:<port>"
server.stop()
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class FakeHttpServer:
    """start() binds 127.0.0.1 on a free port and serves from a daemon thread; stop() shuts down."""

    poll_interval_s = 0.05  # how often serve_forever checks for shutdown()

    def __init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        """The request handler, bound to this fake."""
        raise NotImplementedError

    def start(self) -> Self:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": self.poll_interval_s},
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def root(self) -> str:
        """http://127.0.0.1:PORT, without a path."""
        assert self._server is not None, "start() the server first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"
