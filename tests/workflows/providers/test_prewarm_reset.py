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
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.workflows.providers.kits import git, run_to_end
from workflows.prewarm.image_label import split_reference
from workflows.providers.base import PrewarmInUse, SandboxSpec
from workflows.providers.local import LocalProvider, host_problem

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(host_problem(Path("/sys/fs/cgroup")) is not None, reason="no local"),
]

EVALBOT_TOML = """
[build]
setup = "echo setup >> .built-by && cat src/*.txt > all.txt"
incremental = "echo incremental >> .built-by && cat src/*.txt > all.txt && touch .stamp"
[run]
command = "cat all.txt"
"""
BUILD_OUTPUTS = {"all.txt", ".built-by", ".stamp"}  # .stamp: new at the top, by the build uid


@dataclass
class History:
    repo: Path
    base: str  # the prewarmed commit
    ahead: str  # three commits later: edits, deletions, a rename, a new folder, a mode change
    deps: str  # one commit after base that changes requirements.txt


def write(repo: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "--all")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def make_history(repo: Path) -> History:
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    files = {"evalbot.toml": EVALBOT_TOML, "requirements.txt": "requests==2\n", "src/a.txt": "a1\n",
             "src/b.txt": "b1\n", "src/old.txt": "old\n", "docs/keep.md": "keep\n",
             "docs/gone/x.md": "x\n", "tool.sh": "echo hi\n"}  # fmt: skip
    write(repo, files)
    os.chmod(repo / "tool.sh", 0o755)
    base = commit(repo, "base")
    write(repo, {"src/a.txt": "a2\n"})
    (repo / "src/old.txt").unlink()
    commit(repo, "edit and delete")
    git(repo, "mv", "src/b.txt", "src/renamed.txt")
    git(repo, "rm", "-rq", "docs/gone")
    write(repo, {"new/dir/file.txt": "new\n"})
    commit(repo, "rename, remove a folder, add one")
    os.chmod(repo / "tool.sh", 0o644)
    os.symlink("src/a.txt", repo / "link")
    ahead = commit(repo, "mode change and a symlink")
    git(repo, "checkout", "-q", "-b", "deps", base)
    write(repo, {"requirements.txt": "requests==3\n"})
    deps = commit(repo, "bump a dependency")
    git(repo, "checkout", "-q", "main")
    return History(repo, base, ahead, deps)


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
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for path in sorted((m for m in mounts if m.startswith(f"{top}/")), reverse=True):
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
