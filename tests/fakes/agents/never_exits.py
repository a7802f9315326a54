"""Ignore SIGTERM, leave a double-forked daemon in its own session behind, and sleep forever.
The daemon's command line ends in "evalbot-daemon" and the first argument, if any (a test's own
marker: tests running at the same time on the host must not see each other's daemons)."""

import os
import signal
import sys
import time

DAEMON = " ".join(["evalbot-daemon", *sys.argv[1:2]])
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sh", ["sh", "-c", f"trap '' TERM HUP; while :; do sleep 0.2; done # {DAEMON}"])
    os._exit(0)
while True:
    time.sleep(1)
