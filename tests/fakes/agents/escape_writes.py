"""Write everywhere except /out and /world; record which writes succeeded."""

import os

from _common import report

TARGETS = [
    "/repo/escaped.txt",
    "/case/escaped.txt",
    "/usr/escaped.txt",
    "/etc/escaped.txt",
    "/etc/passwd",
    "/evalbot/runner.py",
    "/evalbot/runner.pyc",  # the compiled runner the local provider binds
    "/escaped.txt",
    "/proc/sys/kernel/hostname",
    "/sys/escaped.txt",
    "/tmp/private.txt",  # allowed: the sandbox's own tmpfs
]
for name in ("EVALBOT_REPO_DIR", "EVALBOT_CASE_DIR"):
    if os.environ.get(name):
        TARGETS.append(os.path.join(os.environ[name], "escaped-env.txt"))


def attempt(path: str) -> str:
    try:
        with open(path, "a") as handle:
            handle.write("escaped\n")
        return "written"
    except OSError as error:
        return f"failed: {error.strerror}"


report({path: attempt(path) for path in TARGETS})
