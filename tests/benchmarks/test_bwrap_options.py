"""benchmarks/bwrap_options.py: each row leaves out exactly its option, the summary is derived
from the rows, and a short real run launches every row's line in a real sandbox.

Broken builds caught: a row that leaves out nothing (its option would cost 0 ms) or more than its
option (a bind's neighbour, a value taken for an option); a summary that subtracts the wrong way or
reads a block's median busy time (10 ms clock ticks) instead of all blocks'; a row whose line
bubblewrap refuses (the run stops on it); the sandbox left behind."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
FULL = [
    "bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup",
    "--hostname", "sandbox", "--new-session", "--unshare-net", "--as-pid-1",
    "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev",
    "--perms", "1777", "--size", "1024", "--tmpfs", "/tmp",
    "--ro-bind", "/img", "/repo", "--bind", "/d/world", "/world", "--ro-bind", "/d/case", "/case",
    "--bind", "/d/out", "/out", "--ro-bind", "/r", "/evalbot/runner",
    "--seccomp", "3", "--chdir", "/repo", "--", "/usr/bin/true",
]  # fmt: skip


@pytest.fixture
def bwrap_options(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bwrap_options

    return bwrap_options


def left_out(full: list[str], row: list[str]) -> Counter[str]:
    return Counter(full) - Counter(row)


def test_each_row_leaves_out_its_option_and_nothing_else(bwrap_options: ModuleType) -> None:
    rows = bwrap_options.variants(FULL)
    expected = {
        "`--unshare-net`": {"--unshare-net": 1},
        "`--unshare-ipc`": {"--unshare-ipc": 1, "--unshare-uts": 1, "--hostname": 1,
                            "sandbox": 1, "--unshare-cgroup": 1},
        "`--dev /dev`": {"--dev": 1, "/dev": 1},
        "`--proc /proc`": {"--proc": 1, "/proc": 1},
        "`/tmp` tmpfs": {"--perms": 1, "1777": 1, "--size": 1, "1024": 1, "--tmpfs": 1, "/tmp": 1},
        "/repo, /world": {"--ro-bind": 2, "--bind": 2, "/img": 1, "/repo": 2, "/d/world": 1,
                          "/world": 1, "/d/case": 1, "/case": 1, "/d/out": 1, "/out": 1},
        "seccomp": {"--seccomp": 1, "3": 1},
    }  # fmt: skip
    for key, gone in expected.items():
        (name,) = [name for name in rows if name.startswith("…") and key in name]
        assert left_out(FULL, rows[name]) == Counter(gone), name
    binds_row = next(row for name, row in rows.items() if "/repo, /world" in name)
    assert binds_row[-4:] == ["--chdir", "/", "--", "/usr/bin/true"]  # /repo is not there
    assert "/evalbot/runner" in binds_row  # the runner's bind is not a sandbox folder's
    assert rows["`true` alone"] == ["/usr/bin/true"]


def test_summary_is_derived_from_the_rows(bwrap_options: ModuleType) -> None:
    names = list(bwrap_options.variants(FULL))
    ms = 1 / 1000
    timings = {name: [(4 * ms, 3 * ms, 5 * ms)] * 3 for name in names}
    timings[names[0]] = [(5 * ms, 4 * ms, 0.0), (6 * ms, 5 * ms, 10 * ms), (9 * ms, 9 * ms, 0.0)]
    lines = "\n".join(bwrap_options.table_lines(timings, 3, 40))
    # wall and CPU: the median block (6, 5); busy time: the mean of all blocks (10 / 3)
    assert "| the sandbox's bubblewrap line, `true` inside | 6.00 ms | 5.00 ms | 3.33 ms |" in lines
    assert (
        "- `--unshare-net`: 2.00 ms of the children's CPU, -1.67 ms of the machine's busy" in lines
    )
    assert "binding only `/` is 1.50, bubblewrap printing its version 1.50" in lines
    assert "3 blocks of 40 launches of each row" in lines


@pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/dev/loop-control").exists() or not shutil.which("bwrap"),
    reason="needs root, loop devices and bubblewrap",
)
def test_a_short_run_launches_every_row(bwrap_options: ModuleType, tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    with bwrap_options.Sandbox(tmp_path) as sandbox:
        measured = bwrap_options.measure(sandbox, 1, 2)
        made = list((tmp_path / "sandboxes").glob("isolation-cost*"))
    assert len(made) == 1
    assert len(measured) == len(bwrap_options.variants(FULL))
    assert all(len(blocks) == 1 for blocks in measured.values())
    assert all(wall > 0 and cpu > 0 for ((wall, cpu, _),) in measured.values())
    assert not any((tmp_path / "sandboxes").glob("isolation-cost*"))
