"""Hard-link files from outside /out into it, so that a collector copying /out would copy them:
host files bound into the sandbox, the runner, the case, the agent's own world copy.
Records which links the sandbox allowed."""

import os

from _common import out_dir, report

SOURCES = {
    "passwd": "/etc/passwd",
    "setuid-passwd": "/usr/bin/passwd",
    "python": "/usr/bin/python3",
    "runner": "/evalbot/runner.py",
    "compiled-runner": "/evalbot/runner.pyc",
    "case": "/case/case.json",
    "repo-file": "/repo/evalbot.toml",
    "proc-environ": "/proc/1/environ",
}
for folder, _dirs, files in os.walk(os.environ.get("EVALBOT_WORLD_DIR", "/world")):
    for name in files[:1]:
        SOURCES["own-world"] = os.path.join(folder, name)  # same disk: allowed, and harmless
    break

links = {}
for name, source in SOURCES.items():
    try:
        os.link(source, os.path.join(out_dir(), f"hl-{name}"))
        links[name] = "linked"
    except OSError as error:
        links[name] = f"failed: {error.strerror}"
report(links)
