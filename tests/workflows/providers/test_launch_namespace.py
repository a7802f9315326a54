"""The mount namespace `local` sandboxes are launched from (launch.c, local/launch_namespace.py):
what the holder keeps and detaches, that a sandbox's bubblewrap starts without the other
sandboxes' disks, and that a bind source the namespace no longer matches sends the start back to
the host's namespace until the namespace is made again."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.mounts import mount_points
from tests.workflows.providers.kits import Kit, run_to_end
from workflows.prewarm.image_label import image_path
from workflows.providers.common.native_runner import find_compiler
from workflows.providers.local import LocalProvider
from workflows.providers.local.launch_namespace import (
    LaunchNamespace,
    kept_lines,
    mount_point,
)

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root, like the provider"),
    pytest.mark.skipif(find_compiler() is None, reason="no C compiler here"),
]


def table_of(namespace_fd: int) -> list[str]:
    """The mount points of the namespace behind a descriptor."""
    read = ["nsenter", f"--mount=/proc/self/fd/{namespace_fd}", "cat", "/proc/self/mountinfo"]
    text = subprocess.run(read, pass_fds=[namespace_fd], capture_output=True, text=True, check=True)
    return [mount_point(line) for line in text.stdout.splitlines()]


def test_mountinfo_paths_are_unescaped_and_only_what_the_holder_keeps_counts() -> None:
    line = "45 27 0:40 / /tmp/a\\040b rw,relatime - tmpfs t rw"
    assert mount_point(line) == "/tmp/a b"
    points = ["/", "/data", "/data/sandboxes", "/data/sandboxes/x", "/data/sandboxesx",
              "/data/images/overlay", "/data/images", "/var/lib/docker/x", "/usr"]  # fmt: skip
    table = "\n".join(f"{n} 27 0:40 / {point} rw - tmpfs t rw" for n, point in enumerate(points))
    lines = kept_lines(table, "/data/sandboxes", ["/usr", "/data/images"])
    assert sorted(mount_point(line) for line in lines) == [
        "/", "/data", "/data/images", "/data/images/overlay", "/data/sandboxes", "/usr",
    ]  # fmt: skip


def test_the_holder_keeps_ancestors_and_kept_folders_and_detaches_the_rest(
    tmp_path: Path, native_programs: tuple[Path, Path]
) -> None:
    sandboxes, images, elsewhere = tmp_path / "sandboxes", tmp_path / "images", tmp_path / "else"
    points = [sandboxes, sandboxes / "disk", images / "overlay", elsewhere]
    mounted: list[Path] = []
    try:
        for point in points:
            point.mkdir(parents=True, exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "t", str(point)], check=True)
            mounted.append(point)
        keep = [Path("/usr"), Path("/proc"), images]
        namespace = LaunchNamespace(native_programs[1], sandboxes, keep)
        held = namespace.copy()
        assert held is not None
        try:
            inside = table_of(held)
        finally:
            os.close(held)
            namespace.close()
        on_host = mount_points()
        mounts = Path("/proc/self/mountinfo").read_text()
    finally:
        for point in reversed(mounted):
            subprocess.run(["umount", str(point)], check=True)
    assert {str(p) for p in points} <= set(on_host)
    assert str(sandboxes) in inside  # the folder itself: an ancestor of every sandbox
    assert str(images / "overlay") in inside  # under a kept folder
    assert str(sandboxes / "disk") not in inside and str(elsewhere) not in inside
    assert len(inside) < len(on_host)
    predicted = kept_lines(mounts, str(sandboxes), [str(p) for p in keep])
    assert sorted(inside) == sorted(mount_point(line) for line in predicted)  # launch.c's rule


def test_a_holder_that_cannot_run_leaves_sandboxes_in_the_hosts_namespace_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = tmp_path / "no-launcher"
    namespace = LaunchNamespace(missing, tmp_path, [])
    assert namespace.copy() is None
    assert any("host's mount namespace" in r.getMessage() for r in caplog.records)
    caplog.clear()
    assert namespace.copy() is None  # the table did not change: not tried again
    assert not caplog.records


async def test_bubblewrap_starts_without_the_other_sandboxes_disks(local_kit: Kit) -> None:
    provider = local_kit.provider
    others = [await provider.create(local_kit.spec(f"exp/case/arm/{n}")) for n in range(3)]
    assert isinstance(provider, LocalProvider) and provider.launch_namespace is not None
    try:
        sandbox = await provider.create(local_kit.spec())
        try:
            await sandbox.start("echo kept > /out/answer.txt; sleep 30")
            runner = await sandbox.known_runner()
            assert runner is not None
            lines = Path(f"/proc/{runner['pid']}/mountinfo").read_text().splitlines()
            started_from = [mount_point(line) for line in lines]
            on_host = mount_points()
            log = sandbox.layout.log.read_text()
        finally:
            await sandbox.terminate()
    finally:
        for other in others:
            await other.terminate()
    disks = {str(s.layout.root) for s in others}
    assert disks <= set(on_host)
    assert str(sandbox.layout.root) in started_from  # its own disk, attached
    assert not disks & set(started_from)
    below = f"{provider.sandbox_dir}/"
    assert [p for p in started_from if p.startswith(below)] == [str(sandbox.layout.root)]
    assert "launch:" not in log  # no step failed, nothing fell back


async def test_a_source_mounted_over_later_is_seen_and_the_namespace_made_again(
    local_kit: Kit,
) -> None:
    """An image mounted over after the namespace was made: the launcher sees that /repo's
    source is another file there and starts bubblewrap in the host's namespace (the sandbox
    sees the new mount); the next look at the host's table makes the namespace again."""
    provider = local_kit.make()
    assert isinstance(provider, LocalProvider)
    image = Path(image_path(local_kit.image))
    try:
        first = await provider.create(local_kit.spec())
        try:
            assert (await run_to_end(first, "true"))["exit_code"] == 0
        finally:
            await first.terminate()
        assert provider.launch_namespace is not None
        provider.launch_namespace.check_every_s = 3600.0  # no look at the host's table
        await asyncio.to_thread(
            subprocess.run, ["mount", "-t", "tmpfs", "t", str(image)], check=True
        )
        try:
            (image / "marker").write_text("mounted later")
            (image / "marker").chmod(0o644)
            image.chmod(0o755)
            seen = []
            for _ in range(2):
                sandbox = await provider.create(local_kit.spec())
                try:
                    state = await run_to_end(sandbox, "cat /repo/marker > /out/seen.txt")
                    seen.append((await sandbox.read_file("/out/seen.txt")).decode())
                    log = sandbox.layout.log.read_text()
                finally:
                    await sandbox.terminate()
                assert state["exit_code"] == 0
                assert ("is another file in the launch namespace" in log) == (len(seen) == 1)
                provider.launch_namespace.check_every_s = 0.0  # the next start looks
        finally:
            await asyncio.to_thread(subprocess.run, ["umount", str(image)], check=True)
    finally:
        provider.close()
    assert seen == ["mounted later", "mounted later"]
