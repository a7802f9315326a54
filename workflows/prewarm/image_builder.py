"""Built checkouts ("images" of the local and process providers), cached per (repo, commit).

    <image_dir>/<repo key>/<full sha>/repo     the checkout, after `setup` ran in it
    <image_dir>/<repo key>/<full sha>/build/   the build's stdout.log, stderr.log, .state.json
    <image_dir>/<repo key>/<full sha>/ready    written last: the image is complete
    <image_dir>/<repo key>/<full sha>.lock     flock held while building

The checkout is built where it stays (a venv records absolute paths). Concurrent builds of one
commit, in one process or many, take the lock in turn: the first builds, the others find `ready`.
A build that died half-way leaves no `ready`, so the next one starts over.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from workflows.providers.base import SandboxCreateError

COMMIT_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./@^~{}-]{0,250}$")
LOG_TAIL_LINES = 15

# (repo folder, build output folder, setup command) -> the runner's final state
SetupRunner = Callable[[Path, Path, str], Awaitable[dict[str, Any]]]


def repo_key(source: Path) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", source.name).strip("-.") or "repo"
    return f"{slug[:40]}-{hashlib.sha256(str(source).encode()).hexdigest()[:12]}"


async def git(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        "git", *args,
        cwd=str(cwd) if cwd else None,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stdout, stderr = await process.communicate()
    return process.returncode or 0, stdout.decode().strip(), stderr.decode(errors="replace").strip()


async def resolve_commit(source: Path, commit: str) -> str:
    if not COMMIT_PATTERN.fullmatch(commit):
        raise SandboxCreateError(f"{commit!r} is not a commit name git would accept")
    safe = f"safe.directory={source}"
    code, sha, _ = await git(
        "-c", safe, "-C", str(source), "rev-parse", "--verify", "--quiet", "--end-of-options",
        f"{commit}^{{commit}}",
    )  # fmt: skip
    if code != 0 or not re.fullmatch(r"[0-9a-f]{40,64}", sha):
        raise SandboxCreateError(f"commit {commit!r} does not exist in {source}")
    return sha


async def checkout(source: Path, sha: str, dest: Path) -> None:
    safe = f"safe.directory={source}"
    code, _, error = await git(
        "-c", safe, "clone", "--quiet", "--no-checkout", "--no-hardlinks", str(source), str(dest)
    )
    if code == 0:
        code, _, error = await git(
            "-c",
            "advice.detachedHead=false",
            "-C",
            str(dest),
            "checkout",
            "--quiet",
            "--detach",
            sha,
        )
    if code != 0:
        raise SandboxCreateError(f"could not check out {sha[:12]}: {error[-300:]}")


@contextlib.asynccontextmanager
async def file_lock(path: Path) -> AsyncIterator[None]:
    """An exclusive flock, waited for without blocking the event loop."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                await asyncio.sleep(0.05)
        yield
    finally:
        os.close(fd)


def log_tail(build_dir: Path) -> str:
    lines: list[str] = []
    for name in ("stdout.log", "stderr.log"):
        with contextlib.suppress(OSError):
            lines += (build_dir / name).read_text(errors="replace").splitlines()
    return "\n".join(lines[-LOG_TAIL_LINES:])


def build_failure(state: dict[str, Any], build_dir: Path) -> str | None:
    """None if the setup succeeded; else one sentence plus the last lines of its log."""
    if state.get("exit_code") == 0 and state.get("termination") is None:
        return None
    if state.get("termination") == "timeout":
        reason = "setup timed out"
    elif state.get("exit_code") is None:
        reason = f"setup was killed (signal {state.get('signal')})"
    else:
        reason = f"setup exited with code {state.get('exit_code')}"
    tail = log_tail(build_dir)
    return f"{reason}; last lines of the build log:\n{tail}" if tail else reason


def make_readable(top: Path) -> None:
    """Every sandbox user must read the image, whatever the umask of the build."""
    for folder, _, names in os.walk(top):
        os.chmod(folder, os.stat(folder).st_mode | 0o555)  # noqa: S103 - read-only image
        for name in names:
            path = os.path.join(folder, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode):
                os.chmod(path, mode | 0o444 | (0o111 if mode & 0o100 else 0))


class ImageBuilder:
    def __init__(self, image_dir: Path) -> None:
        self.image_dir = image_dir

    async def build(self, source_repo: Path, commit: str, setup: str, run: SetupRunner) -> str:
        source = source_repo.resolve()
        if not (source / ".git").exists() and not (source / "HEAD").is_file():
            raise SandboxCreateError(f"{source_repo} is not a git repository")
        sha = await resolve_commit(source, commit)
        folder = self.image_dir / repo_key(source) / sha
        if (folder / "ready").is_file():
            return str(folder / "repo")
        async with file_lock(folder.with_name(f"{sha}.lock")):
            if not (folder / "ready").is_file():
                await self.build_clean(source, sha, setup, folder, run)
        return str(folder / "repo")

    async def build_clean(
        self,
        source: Path,
        sha: str,
        setup: str,
        folder: Path,
        run: SetupRunner,
        describe: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        """Clone `sha` into `folder`/repo, run `setup` there, write `ready` (plus `describe()`)."""
        await asyncio.to_thread(shutil.rmtree, folder, ignore_errors=True)  # a half-built leftover
        folder.mkdir(parents=True)
        await checkout(source, sha, folder / "repo")
        build_dir = folder / "build"
        build_dir.mkdir()
        if setup.strip():
            state = await run(folder / "repo", build_dir, setup)
            failure = build_failure(state, build_dir)
            if failure:
                raise SandboxCreateError(f"building {sha[:12]} failed: {failure}")
        await asyncio.to_thread(make_readable, folder / "repo")
        write_ready(folder, source, sha, setup, describe() if describe else None)


def write_ready(
    folder: Path, source: Path, sha: str, setup: str, extra: dict[str, Any] | None = None
) -> None:
    record = {"source": str(source), "commit": sha, "setup": setup, "built_at": time.time()}
    (folder / "ready").write_text(json.dumps(record | (extra or {})))


def read_ready(folder: Path) -> dict[str, Any] | None:
    """The `ready` record of a built image folder; None if it is not (completely) built."""
    try:
        record = json.loads((folder / "ready").read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None
