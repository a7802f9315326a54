"""The shared /etc of `local` sandboxes (workflows/providers/common/bwrap.py, `shared_etc`): what
it copies and skips, made once per content, and what an agent sees in it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.workflows.providers.kits import Kit, run_to_end
from workflows.providers.common.bwrap import ETC_FILES, BwrapCommand, shared_etc

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def host_etc(tmp_path: Path) -> Path:
    etc = tmp_path / "etc"
    (etc / "ssl" / "certs").mkdir(parents=True)
    (etc / "ssl" / "certs" / "ca.pem").write_text("CERT")
    (etc / "ssl" / "private").mkdir(mode=0o700)
    (etc / "ssl" / "private" / "host.key").write_text("KEY")
    (etc / "ld.so.cache").write_bytes(b"\x00cache")
    (etc / "localtime").symlink_to("/usr/share/zoneinfo/Etc/UTC")
    (etc / "shadow").write_text("root:secret")  # not in ETC_FILES: never copied
    return etc


def test_copies_the_listed_files_keeps_links_and_skips_host_keys(
    host_etc: Path, tmp_path: Path
) -> None:
    made = shared_etc(tmp_path / "shared", host_etc)
    assert sorted(p.name for p in made.iterdir()) == sorted(
        ["ssl", "ld.so.cache", "localtime", "passwd", "group", "hosts"]
    )
    assert (made / "ssl" / "certs" / "ca.pem").read_text() == "CERT"
    assert not (made / "ssl" / "private").exists()
    assert os.readlink(made / "localtime") == "/usr/share/zoneinfo/Etc/UTC"
    assert (made / "passwd").read_bytes() == b""  # each sandbox binds its own on it
    assert made.stat().st_mode & 0o777 == 0o755
    assert [p.name for p in made.parent.iterdir()] == [made.name]  # no partial folder left


def test_made_once_per_content_and_older_copies_kept(host_etc: Path, tmp_path: Path) -> None:
    first = shared_etc(tmp_path / "shared", host_etc)
    (first / "ssl" / "certs" / "marker").write_text("kept")
    assert shared_etc(tmp_path / "shared", host_etc) == first
    assert (first / "ssl" / "certs" / "marker").exists()  # not made again
    (host_etc / "ssl" / "certs" / "ca.pem").write_text("RENEWED CERT")
    second = shared_etc(tmp_path / "shared", host_etc)
    assert second != first and (second / "ssl" / "certs" / "ca.pem").read_text() == "RENEWED CERT"
    assert first.is_dir()  # still bound into sandboxes started before


def etc_binds(argv: list[str]) -> list[tuple[str, str]]:
    """(source, destination) of every bind whose destination is under /etc."""
    return [
        (argv[i + 1], argv[i + 2])
        for i, arg in enumerate(argv)
        if arg in ("--ro-bind", "--ro-bind-try", "--bind") and argv[i + 2].startswith("/etc")
    ]


def test_with_a_base_etc_is_one_bind_and_extra_files_are_refused(tmp_path: Path) -> None:
    def command(**options: object) -> BwrapCommand:
        return BwrapCommand(uid=1, gid=1, etc_dir=tmp_path, binds=[], chdir="/", tmp_mb=1,
                            **options)  # type: ignore[arg-type]  # fmt: skip

    own = [(str(tmp_path / name), f"/etc/{name}") for name in ("passwd", "group", "hosts")]
    base = tmp_path / "base"
    assert etc_binds(command(etc_base=base).argv(["true"])) == [(str(base), "/etc"), *own]
    per_file = etc_binds(command().argv(["true"]))
    assert len(per_file) == len(ETC_FILES) + 3  # what a shared /etc saves
    with pytest.raises(ValueError, match="extra /etc files"):
        command(etc_base=base, extra_etc=("resolv.conf",)).argv(["true"])


async def test_a_sandbox_sees_the_shared_etc_with_its_own_user(local_kit: Kit) -> None:
    sandbox = await local_kit.provider.create(local_kit.spec())
    try:
        await run_to_end(
            sandbox,
            "ls -A /etc > /out/etc.txt; id -un > /out/user.txt; "
            "touch /etc/x 2>/out/touch.txt; echo $? >> /out/touch.txt",
        )
        listing = (await sandbox.read_file("/out/etc.txt")).decode().split()
        user = (await sandbox.read_file("/out/user.txt")).decode().strip()
        touch = (await sandbox.read_file("/out/touch.txt")).decode()
    finally:
        await sandbox.terminate()
    host = [name for name in ETC_FILES if os.path.lexists(f"/etc/{name}")]
    assert sorted(listing) == sorted([*host, "passwd", "group", "hosts"])
    assert user == "agent"
    assert "Read-only file system" in touch and touch.strip().endswith("1")
