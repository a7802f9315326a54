"""The mount namespace `local` sandboxes are launched from (launch.c; docs/sandbox.md, "Start-up
cost").

bubblewrap reads the whole mount table after each of its binds, and the host's table holds every
sandbox disk mounted. A holder (`launch --hold-namespace`) makes a private mount namespace without
them — nor anything else a sandbox does not bind: only the ancestors of the sandboxes' folder and
of the kept folders, and what lies under the kept folders — and this module keeps a descriptor of
it. Each start passes it to the launcher, which starts bubblewrap in a copy of it with the
sandbox's own disk attached, once it has checked that every bind source is the same file there as
on the host (else it starts bubblewrap in the host's namespace, as before).

Nothing mounted on the host after the holder ran reaches the namespace, so it is made again when
the host's mounts it would keep change (an image's overlay, say), looked at no more than once per
`check_every_s`; between a change and the next look, the launcher's check keeps
sandboxes right, at the old cost.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from workflows.file_systems import within
from workflows.providers.local.namespace_holder import namespace_from_holder

log = logging.getLogger(__name__)

ESCAPED = re.compile(r"\\([0-7]{3})")


def mount_point(line: str) -> str:
    """The mount point of a /proc/self/mountinfo line (the kernel escapes spaces and the like)."""
    return ESCAPED.sub(lambda found: chr(int(found[1], 8)), line.split(" ", 5)[4])


def kept(point: str, sandbox_dir: str, keep: Sequence[str]) -> bool:
    """Whether the holder keeps a mount at `point` (launch.c, `kept`: the same rule): nothing
    below the sandboxes' folder; the ancestors of it and of the kept folders; what lies below a
    kept folder."""
    if point != sandbox_dir and within(point, sandbox_dir):
        return False
    return any(within(folder, point) for folder in (sandbox_dir, *keep)) or any(
        within(point, folder) for folder in keep
    )


def kept_lines(table: str, sandbox_dir: str, keep: Sequence[str]) -> frozenset[str]:
    """The lines of a mount table the holder would keep: what a namespace made now would hold,
    so that a change elsewhere (another data folder's disks, a container's mounts) makes no new
    namespace."""
    lines = table.splitlines()
    return frozenset(line for line in lines if kept(mount_point(line), sandbox_dir, keep))


class LaunchNamespace:
    def __init__(
        self,
        launcher: Path,
        sandbox_dir: Path,
        keep: Sequence[Path],
        *,
        check_every_s: float = 1.0,
    ) -> None:
        self._sandbox_dir, self._keep = str(sandbox_dir), [str(folder) for folder in keep]
        self._holder = [str(launcher), "--hold-namespace", self._sandbox_dir, *self._keep]
        self.check_every_s = check_every_s
        self._held: int | None = None
        self._made_from: frozenset[str] | None = None
        self._looked_at = float("-inf")
        self._lock = threading.Lock()

    def copy(self) -> int | None:
        """A descriptor of the namespace for one launch, which the caller closes; the namespace is
        made again first if the host's mounts changed. None where none can be made (said in the
        log): sandboxes then start in the host's namespace."""
        with self._lock:
            now = time.monotonic()
            if now - self._looked_at >= self.check_every_s:
                self._looked_at = now
                mounts = Path("/proc/self/mountinfo").read_text()
                table = kept_lines(mounts, self._sandbox_dir, self._keep)
                if table != self._made_from:
                    self._made_from = table
                    self._replace(self._made())
            return None if self._held is None else os.dup(self._held)

    def _replace(self, made: int | None) -> None:
        if self._held is not None:
            os.close(self._held)
        self._held = made

    def _made(self) -> int | None:
        made, why = namespace_from_holder(self._holder, "mnt")
        if made is None:
            log.warning("evalbot: sandboxes start in the host's mount namespace (%s)", why)
        return made

    def close(self) -> None:
        with self._lock:
            self._replace(None)
            self._made_from = None
            self._looked_at = float("-inf")
