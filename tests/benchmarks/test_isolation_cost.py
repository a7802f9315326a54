"""benchmarks/isolation_cost.py: its summary lines are derived from the rows, and a short real run
launches every command in a real sandbox with a larger real mount table.

Broken builds caught: a summary that subtracts the wrong rows or divides by the wrong number of
mounts; a run whose extra disks never reach the mount table (the two tables would count the
same); a runner launch that does not tell it is ready or does not finish its agent (the script
stops), the Python and the native runner's; disks or the sandbox left behind."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def isolation_cost(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import isolation_cost

    return isolation_cost


def timings(milliseconds: dict[str, list[float]]) -> dict[str, tuple[list[float], list[float]]]:
    """The same wall and CPU seconds for each try."""
    return {
        name: ([v / 1000 for v in ms], [v / 1000 for v in ms]) for name, ms in milliseconds.items()
    }


def test_summary_lines_are_the_differences_of_the_medians(isolation_cost: ModuleType) -> None:
    measured = timings(
        {
            "true|as is": [9.0, 10.0, 30.0],  # median 10, not the mean
            "python|as is": [20.0, 20.0, 21.0],
            "python runner|as is": [26.0, 25.0, 26.0],
            "native|as is": [13.0, 12.0, 40.0],  # median 13
            "true|+128 disks": [17.0, 17.0, 1.0],
            "python|+128 disks": [27.0, 27.0, 27.0],
            "python runner|+128 disks": [33.0, 33.0, 33.0],
            "native|+128 disks": [19.8, 19.8, 19.8],
        }
    )
    lines = isolation_cost.table_lines(measured, {"as is": 21, "+128 disks": 149}, launches=3)
    text = "\n".join(lines)
    assert "| bwrap + setpriv + `true` | 10.0 ms | 17.0 ms | 10.0 ms | 17.0 ms | 1.70 |" in text
    assert (
        "- table as is: bubblewrap and setpriv 10.0 ms; the interpreter's start 10.0 ms; "
        "a start with the Python runner 26.0 ms, with the native runner 13.0 ms "
        "(saves 13.0 ms, native ÷ Python 0.50)"
    ) in text
    assert "with the native runner 19.8 ms (saves 13.2 ms, native ÷ Python 0.60)" in text
    assert "add 7.0 ms of CPU to each bubblewrap launch (55 µs per mount)" in text
    assert "mount table 21 entries as is, 149 with the extra disks" in text


@pytest.mark.serial  # counts the host's whole mount table: no other test may mount meanwhile
@pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/dev/loop-control").exists() or not shutil.which("bwrap"),
    reason="needs root, loop devices and bubblewrap",
)
def test_a_short_run_launches_each_command_with_both_tables(
    isolation_cost: ModuleType, tmp_path: Path
) -> None:
    tmp_path.chmod(0o755)
    before = isolation_cost.mount_count()
    measured, tables = isolation_cost.measure(2, 3, tmp_path)
    assert tables == {"as is": before + 1, "+3 disks": before + 4}  # +1: the sandbox's disk
    assert sorted(measured) == sorted(
        f"{kind}|{table}"
        for kind in ("true", "python", "python runner", "native")
        for table in tables
    )
    assert all(len(walls) == 2 and min(cpus) > 0 for walls, cpus in measured.values())
    assert isolation_cost.mount_count() == before  # every disk unmounted, the sandbox's too
    assert not any((tmp_path / "sandboxes").glob("isolation-cost*"))  # the sandbox is removed
