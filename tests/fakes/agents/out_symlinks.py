"""Plant symlinks in /out that point out of it: at host files (absolute and `..` paths), at the
sandbox's own metadata beside /out on the host, at /proc, and a folder link to /. The answer itself
is a link. A collector that followed any of them would copy what the link points at on the HOST.

Usage: out_symlinks.py HOST_FILE"""

import os
import sys

from _common import out_dir, report

out = out_dir()
host_file = sys.argv[1] if len(sys.argv) > 1 else "/etc/hostname"
LINKS = {
    "answer.md": host_file,  # the answer is a link to a host-only file
    "transcript.jsonl": "/proc/1/environ",  # on the host: init's environment
    "usage.json": "/etc/shadow",
    "meta-copy.json": "../meta.json",  # the sandbox's root-only metadata (spec env) on the host
    "runner-log.txt": "../runner.log",
    "artifacts": "/",  # a folder link: walking it would walk the host's root
    "deep/er/passwd.txt": "../../../../../../../../../../etc/passwd",
    "host-file-relative.txt": "../../../../../../../.." + host_file,
}
made = {}
for name, target in LINKS.items():
    path = os.path.join(out, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        os.symlink(target, path)
        made[name] = "linked"
    except OSError as error:
        made[name] = f"failed: {error.strerror}"
report(made)
