"""Write 1 GB into the output folder in 1 MB files; record how far it got."""

import os

from _common import out_dir, report

block = b"\0" * (1 << 20)
written, error = 0, ""
folder = os.path.join(out_dir(), "filler")
os.makedirs(folder, exist_ok=True)
try:
    for index in range(1024):
        with open(os.path.join(folder, f"{index:04d}.bin"), "wb") as handle:
            handle.write(block)
        written += 1
except OSError as failure:
    error = failure.strerror or str(failure)
for name in os.listdir(folder)[:8]:  # make room for the report
    os.unlink(os.path.join(folder, name))
report({"written_mb": written, "error": error})
raise SystemExit(1 if error else 0)
