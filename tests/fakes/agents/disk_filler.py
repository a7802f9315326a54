"""Write 1 GB into the output folder in 1 MB files. Exit 3 if the disk filled up first."""

import os
import time

from _common import out_dir

block = b"\0" * (1 << 20)
folder = os.path.join(out_dir(), "filler")
os.makedirs(folder, exist_ok=True)
try:
    for index in range(1024):
        with open(os.path.join(folder, f"{index:04d}.bin"), "wb") as handle:
            handle.write(block)
except OSError as failure:
    print(f"stopped: {failure.strerror}", flush=True)
    time.sleep(0.3)  # an agent keeps going for a while after a failed write
    raise SystemExit(3) from None
