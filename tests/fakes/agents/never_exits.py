"""Ignore SIGTERM, leave a double-forked daemon in its own session behind, and sleep forever."""

import os
import signal
import time

signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp(
            "sh", ["sh", "-c", "trap '' TERM HUP; while :; do sleep 0.2; done # evalbot-daemon"]
        )
    os._exit(0)
while True:
    time.sleep(1)
