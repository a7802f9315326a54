"""benchmarks/cpu_by_command.py: samples are grouped by command as `perf report` prints them, and
the table and its summary are derived from the counts.

Broken builds caught: a kernel worker or a runner counted once per instance name instead of under
one row; the worker's Python not split by user and kernel space; the idle task counted as work;
the total or the ranking taken from the wrong side; a summary over the wrong rows."""

from __future__ import annotations

import collections
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

REPORT = """\
# a comment line perf may print
    37.44%         4000  swapper          [kernel.kallsyms]
    27.62%         3109  python           libpython3.11.so.1.0
     7.38%          831  python           [kernel.kallsyms]
     2.24%          252  python           libc.so.6
     1.00%          100  kworker/u8:3-ev  [kernel.kallsyms]
     0.50%           50  kworker/0:1      [kernel.kallsyms]
     2.44%          275  runner-c35535df  runner-c35535df
    10.45%         1661  bwrap            [kernel.kallsyms]
"""


@pytest.fixture
def cpu_by_command(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import cpu_by_command

    return cpu_by_command


def test_samples_are_grouped_by_command(cpu_by_command: ModuleType) -> None:
    counted = cpu_by_command.parse_report(REPORT)
    assert counted == {
        "python, user": 3109 + 252,
        "python, kernel": 831,
        "kworker": 150,
        "runner": 275,
        "bwrap": 1661,
    }


def test_the_table_ranks_what_local_adds_and_sums_the_rest(cpu_by_command: ModuleType) -> None:
    process = collections.Counter(
        {"python, user": 499, "python, kernel": 0, "temporal": 998, "bwrap": 499}
    )
    local = collections.Counter(
        {"python, user": 998, "python, kernel": 499, "temporal": 998, "bwrap": 1996}
    )
    local.update({f"tool{index}": 1 for index in range(20)})  # more rows than are shown
    lines = cpu_by_command.table_lines({"process": process, "local": local}, 1000, 2, 25)
    rows = [line for line in lines if line.startswith("| ") and "---" not in line][1:]
    assert rows[0] == "| bwrap | 1.00 | 4.00 | +3.00 |"  # 1,996 samples at 499 Hz, 1,000 cells
    assert rows[1].startswith("| python, kernel | 0.00 | 1.00 |")
    assert rows[2].startswith("| python, user | 1.00 | 2.00 |")
    assert rows[-1] == "| all | 4.00 | 9.04 | +5.04 |"
    assert rows[-2].startswith("| other | ")  # the tools not shown, and temporal (adds nothing)
    assert len(rows) == cpu_by_command.SHOWN + 2
    assert "2 rounds of 500 cells (25 cases" in lines[0]
    assert lines[-1] == (
        "Of what `local` adds, bubblewrap is 0.60 and the worker's own Python (its interpreter "
        "and its system calls) 0.40."
    )
