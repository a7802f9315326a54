"""Fork until the kernel refuses, and keep trying forever."""

import os
import time

from _common import report

report({"started": True})
refused = 0
while True:
    try:
        os.fork()
    except OSError:
        refused += 1
        time.sleep(0.01)
