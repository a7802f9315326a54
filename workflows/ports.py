"""Free loopback ports for servers we start (the embedded Temporal dev server; the tests' servers).

Binding port 0 and closing the socket hands the port back to the kernel, which may give it to the
next process that binds port 0: another dev server's internal services, a test's fake, before our
server has bound it. Then our server fails to start, or worse, a readiness probe finds the other
server listening and we talk to it. So the port is left in TIME_WAIT instead: a connection is
accepted on it and closed from the accepting side first. For a minute the kernel skips it when it
picks a port for bind(0), while a server that binds it by number with SO_REUSEADDR (Go's net,
asyncio, PostgreSQL, as our servers do) still can. The Temporal CLI reserves its own internal ports
the same way.
"""

from __future__ import annotations

import socket

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((LOOPBACK, 0))
        listener.listen(1)
        port = int(listener.getsockname()[1])
        with socket.create_connection((LOOPBACK, port)) as client:
            accepted, _ = listener.accept()
            accepted.close()  # this side closes first, so this side's end waits (TIME_WAIT)
            client.recv(1)  # the close has reached the client: it closes in turn
    return port
