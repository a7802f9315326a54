"""Collect everything readable that a sandbox should hide: host env, home folders, given paths."""

import os
import sys

from _common import out_dir, report

SKIP = ("/proc", "/sys", "/usr", "/dev")
LOOK = ["/root", "/home", "/work", "/etc", "/tmp", "/var", "/run", "/", *sys.argv[1:]]


def read_small(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read(65536).decode(errors="replace")
    except OSError as error:
        return f"<{error.strerror}>"


def walk(top: str, found: dict[str, str]) -> None:
    for folder, dirs, files in os.walk(top, onerror=lambda error: None):
        dirs[:] = [d for d in dirs if not os.path.join(folder, d).startswith(SKIP)]
        for name in files:
            path = os.path.join(folder, name)
            if not path.startswith(os.path.join(out_dir(), "")):
                found[path] = read_small(path)
        if len(found) > 2000:
            return


found: dict[str, str] = {}
for top in LOOK:
    if os.path.isdir(top):
        walk(top, found)
    else:
        found[top] = read_small(top)
for pid in ("1", "self"):
    found[f"/proc/{pid}/environ"] = read_small(f"/proc/{pid}/environ")
report({"env": dict(os.environ), "files": found})
