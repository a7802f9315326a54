"""Reset to commit on the `local` provider: a prewarmed snapshot, then `build_image` of a commit
three ahead gives exactly the tree of a fresh checkout of that commit (deleted, renamed, new and
mode-changed files included), built by `build.incremental`; a dependency change runs the full
`build.setup` instead; with no prewarmed ancestor the build is cold. Real git, bubblewrap and
overlayfs.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mounts import mount_points
from tests.workflows.providers.histories import BUILD_OUTPUTS, History, make_history
from tests.workflows.providers.kits import git, run_to_end
from workflows.prewarm.image_label import split_reference
from workflows.providers.base import PrewarmInUse, SandboxSpec
from workflows.providers.local import LocalProvider, host_problem

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(host_problem(Path("/sys/fs/cgroup")) is not None, reason="no local"),
]


def fingerprint(top: Path) -> dict[str, str]:
    """path -> kind, mode and content hash of everything below `top` except .git."""
    found = {}
    for folder, dirs, names in os.walk(top):
        dirs[:] = [d for d in dirs if d != ".git" or Path(folder) != top]
        for name in (*dirs, *names):
            path = Path(folder, name)
            info = path.lstat()
            if path.is_symlink():
                digest = "link:" + os.readlink(path)
            elif path.is_dir():
                digest = "dir"
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[str(path.relative_to(top))] = f"{digest} {info.st_mode & 0o111:o}"
    return found


def fresh_checkout(repo: Path, sha: str, dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(repo), str(dest)], check=True)
    git(dest, "checkout", "-q", "--detach", sha)
    return dest


@pytest.fixture
def history(tmp_path: Path) -> Iterator[History]:
    yield make_history(tmp_path / "agent")
    unmount_below(tmp_path)


def unmount_below(top: Path) -> None:
    """Overlays the test left mounted (the images' /repo), innermost first."""
    for path in sorted((m for m in mount_points() if m.startswith(f"{top}/")), reverse=True):
        subprocess.run(["umount", "--lazy", path], check=False)


def provider(base: Path, cow: str = "auto") -> LocalProvider:
    return LocalProvider(base / "sandboxes", base / "images", start_timeout_s=20, cow=cow)


SETUP = "echo setup >> .built-by && cat src/*.txt > all.txt"


@pytest.mark.parametrize("cow", ["overlay", "copy"])
async def test_a_reset_gives_exactly_the_tree_of_a_fresh_checkout(
    history: History, tmp_path: Path, cow: str
) -> None:
    local = provider(tmp_path, cow)
    prewarmed = await local.prewarm(history.repo, history.base, SETUP)
    assert prewarmed.commit == history.base and prewarmed.size_bytes
    reference = await local.build_image(history.repo, history.ahead, "unused: a reset")
    image, origin = split_reference(reference)
    assert origin is not None and origin.kind == "reset" and origin.base == history.base[:12]
    assert origin.newest_age_s is not None and origin.newest_age_s < 60
    fresh = fingerprint(fresh_checkout(history.repo, history.ahead, tmp_path / "fresh"))
    built = fingerprint(Path(image))
    assert {k: v for k, v in built.items() if k not in BUILD_OUTPUTS} == fresh
    for gone in ("src/old.txt", "src/b.txt", "docs/gone", "docs/gone/x.md"):
        assert gone not in built
    assert (Path(image) / "all.txt").read_text() == "a2\nb1\n"
    assert (Path(image) / ".built-by").read_text() == "setup\nincremental\n"
    assert os.path.ismount(image) is (cow == "overlay")
    assert Path(prewarmed.reference, "repo", "src", "old.txt").is_file()  # the snapshot is intact
    assert await local.build_image(history.repo, history.ahead, "x") == reference  # cached


async def test_a_dependency_change_runs_the_full_setup(history: History, tmp_path: Path) -> None:
    local = provider(tmp_path)
    await local.prewarm(history.repo, history.base, SETUP)
    image, origin = split_reference(await local.build_image(history.repo, history.deps, SETUP))
    assert origin is not None and origin.kind == "full"
    assert origin.reason == "deps:requirements.txt" and origin.base == history.base[:12]
    assert (Path(image) / ".built-by").read_text() == "setup\n"  # a clean checkout, set up once
    assert not os.path.ismount(image)
    assert (Path(image) / "requirements.txt").read_text() == "requests==3\n"


async def test_no_prewarmed_ancestor_is_a_cold_build_and_its_own_commit_needs_no_build(
    history: History, tmp_path: Path
) -> None:
    local = provider(tmp_path)
    _, cold = split_reference(await local.build_image(history.repo, history.ahead, "true"))
    assert cold is not None and cold.kind == "cold" and cold.base == ""
    await local.prewarm(history.repo, history.ahead, SETUP)
    _, older = split_reference(await local.build_image(history.repo, history.base, "true"))
    assert older is not None and older.kind == "cold"  # a descendant is no base
    git(history.repo, "commit", "-q", "--allow-empty", "-m", "empty")
    _, same = split_reference(await local.build_image(history.repo, "main~1", "true"))
    assert same is not None and same.kind == "cold"  # main~1 = ahead: its image was cached cold
    tip = git(history.repo, "rev-parse", "HEAD")
    _, warm = split_reference(await local.build_image(history.repo, tip, "true"))
    assert warm is not None and warm.kind == "reset"


async def test_the_image_runs_in_a_sandbox_and_survives_a_lost_mount(
    history: History, tmp_path: Path
) -> None:
    local = provider(tmp_path)
    await local.prewarm(history.repo, history.base, SETUP)
    reference = await local.build_image(history.repo, history.ahead, "x")
    image = split_reference(reference)[0]
    await asyncio.to_thread(subprocess.run, ["umount", image], check=True)  # as after a reboot
    world = tmp_path / "world"
    world.mkdir()
    sandbox = await local.create(SandboxSpec("exp/c/a/0", reference, world, {"case.json": b"{}"}))
    try:
        state = await run_to_end(sandbox, "cat all.txt && cat link")
        assert state["exit_code"] == 0
        assert await sandbox.read_file("/out/stdout.log") == b"a2\nb1\na2\n"
        assert json.loads(sandbox.layout.meta.read_text())["image"] == image
        with pytest.raises(PrewarmInUse):  # a live sandbox uses an image derived from it
            prewarmed = local.snapshots.list(history.repo.resolve())[0]
            await local.discard_prewarmed(history.repo, prewarmed.reference)
    finally:
        await sandbox.terminate()


async def test_discard_keeps_what_running_experiments_need(
    history: History, tmp_path: Path
) -> None:
    local = provider(tmp_path)
    prewarmed = await local.prewarm(history.repo, history.base, SETUP)
    image = split_reference(await local.build_image(history.repo, history.ahead, "x"))[0]
    with pytest.raises(PrewarmInUse):
        await local.discard_prewarmed(history.repo, prewarmed.reference, protect={history.ahead})
    assert os.path.ismount(image)
    await local.discard_prewarmed(history.repo, prewarmed.reference)
    assert not Path(prewarmed.reference).exists() and not Path(image).parent.exists()
    await local.discard_prewarmed(history.repo, prewarmed.reference)  # gone: a no-op
    _, origin = split_reference(await local.build_image(history.repo, history.ahead, SETUP))
    assert origin is not None and origin.kind == "cold"
