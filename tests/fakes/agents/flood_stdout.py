"""Print 1 GB to stdout."""

import sys

block = b"x" * (1 << 20)
for _ in range(1024):
    sys.stdout.buffer.write(block)
sys.stdout.flush()
