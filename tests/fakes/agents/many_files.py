"""Answer, then try to create a million tiny files in /out/many/ (until the disk runs out of
inodes or space). The collector copies at most MAX_OUT_FILES of them."""

import os
import time

from _common import out_dir, report

out = out_dir()
with open(os.path.join(out, "answer.md"), "w") as handle:
    handle.write("The answer is 42.\n")
folder = os.path.join(out, "many")
os.makedirs(folder)
started, created, stopped_by = time.time(), 0, "done"
for index in range(1_000_000):
    try:
        fd = os.open(os.path.join(folder, f"f{index:07d}"), os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"x")
        os.close(fd)
    except OSError as error:
        stopped_by = error.strerror
        break
    created += 1
if created:  # free an inode for result.json
    os.unlink(os.path.join(folder, f"f{created - 1:07d}"))
report({"created": created, "stopped_by": stopped_by, "seconds": round(time.time() - started, 2)})
