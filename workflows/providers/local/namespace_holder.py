"""A namespace made by a short-lived holder (launch.c's `--hold-namespace`, `--hold-network`),
kept by a descriptor once the holder has exited."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence


def namespace_from_holder(holder: Sequence[str], kind: str) -> tuple[int | None, str]:
    """Start `holder`, wait for its "ready" line, open /proc/PID/ns/`kind` (mnt, net) and let it
    exit: (the descriptor, close-on-exec, "") or (None, why not)."""
    try:
        process = subprocess.Popen(
            list(holder),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd="/",
        )
    except OSError as error:
        return None, str(error)
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    made = None
    try:
        if process.stdout.readline() == b"ready\n":  # it waits for EOF on stdin meanwhile
            made = os.open(f"/proc/{process.pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        process.stdin.close()
        said = process.stderr.read().decode(errors="replace").strip()
        process.wait()
        process.stdout.close()
        process.stderr.close()
    return made, "" if made is not None else said or f"exit {process.returncode}"
