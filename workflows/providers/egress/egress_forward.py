"""Inside a sandbox: bridge 127.0.0.1:PORT to the egress proxy's unix socket, then daemonize.

    python3 -I -S /evalbot/egress_forward.py PORT /evalbot/egress.sock

The sandbox's network namespace has only `lo`, so HTTP clients that speak TCP to a proxy
(HTTP_PROXY=http://127.0.0.1:PORT) need this bridge to the unix socket bound in from the host. It
returns (exit 0) once it listens, so the agent's command can follow it in the same shell; the
serving child keeps no standard streams open (the runner waits for the agent's pipes to close) and
dies with the sandbox (the runner kills every process once the agent exits). Standard library only,
few imports: it runs before every agent that has an allowlist.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading

CHUNK = 1 << 16


def pump(source: socket.socket, dest: socket.socket) -> None:
    """Copy until end of stream, then pass the end on (half-close)."""
    try:
        while chunk := source.recv(CHUNK):
            dest.sendall(chunk)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dest.shutdown(socket.SHUT_WR)


def bridge(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def serve(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        threading.Thread(target=bridge, args=(client, path), daemon=True).start()


def detach() -> None:
    """Fork; the parent exits 0 (the shell goes on to the agent), the child serves."""
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[0].isdigit():
        sys.stderr.write("usage: egress_forward.py PORT UNIX_SOCKET\n")
        return 2
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(argv[0])))
    listener.listen(64)
    sys.stdout.flush()
    detach()
    serve(listener, argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
