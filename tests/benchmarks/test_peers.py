"""What benchmarks/peers.py says about the folder its rows run in."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
tmpfs /dev/shm tmpfs rw 0 0
/dev/loop0 /mnt/journaled ext4 rw,relatime 0 0
/dev/loop1 /mnt/journaled/inner xfs rw 0 0
"""


@pytest.fixture
def peers(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # its siblings import each other by name
    import peers

    return peers


def test_the_file_system_is_the_longest_mount_point_and_says_if_ext4_has_a_journal(
    peers: ModuleType, tmp_path: Path
) -> None:
    mounts, journals = tmp_path / "mounts", tmp_path / "jbd2"
    mounts.write_text(MOUNTS)
    (journals / "loop0-8").mkdir(parents=True)  # jbd2 names journaled devices `<device>-<inode>`
    (journals / "vda1-8").mkdir()  # a prefix of no listed device: vda has no journal

    def kind(path: str) -> str:
        return str(peers.file_system(path, str(mounts), str(journals)))

    assert kind("/tmp/evalbot-bench-x") == "ext4, no journal"
    assert kind("/mnt/journaled/sandboxes") == "ext4, journal"
    assert kind("/mnt/journaled/inner/a") == "xfs"
    assert kind("/dev/shm") == "tmpfs"
    assert kind("/mnt/journaledx") == "ext4, no journal"  # not under /mnt/journaled
    assert peers.file_system("/tmp", str(mounts), str(tmp_path / "none")) == "ext4, no journal"
