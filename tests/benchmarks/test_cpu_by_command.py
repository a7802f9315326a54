"""benchmarks/cpu_by_command.py: samples are grouped by command as `perf script` prints them, the
table and its summary are derived from the counts, and a short real run under perf finds what it
should.

Broken builds caught: a kernel worker or a runner counted once per instance name instead of under
one row; the worker's Python not split by user and kernel space; a helper Python taken for the
worker; the idle task counted as work; a command name with a space cut short; the total or the
ranking taken from the wrong side; a summary over the wrong rows."""

from __future__ import annotations

import collections
import os
import shutil
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

LIBPYTHON = "(/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0)"
KERNEL = "([kernel.kallsyms])"
SCRIPT = "\n".join(
    [f"          python  7059      7f5e345d0ead {LIBPYTHON}"] * 5  # the worker: most samples
    + [f"          python  7059  ffffffff815a6eb5 {KERNEL}"] * 2
    + [f"          python  7080      7f5e345d0ead {LIBPYTHON}"] * 3  # a spawner
    + [f"         swapper     0  ffffffff82240ddb {KERNEL}"] * 9
    + [f" kworker/u8:3-ev   120  ffffffff815a6eb5 {KERNEL}"]
    + [f"     kworker/0:1    14  ffffffff815a6eb5 {KERNEL}"]
    + ["  runner-c35535df  8001            4011a0 (/srv/runner-c35535df)"] * 2
    + [f"           bwrap  8002  ffffffff815a6eb5 {KERNEL}"] * 4
    + ["  Web Content      8003            4011a0 (/usr/lib/firefox/libxul.so)"]
    + ["# a line perf may print that is not a sample"]
)


@pytest.fixture
def cpu_by_command(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import cpu_by_command

    return cpu_by_command


def test_samples_are_grouped_by_command(cpu_by_command: ModuleType) -> None:
    assert cpu_by_command.parse_script(SCRIPT) == {
        "python, worker, user": 5,
        "python, worker, kernel": 2,
        "python, other": 3,
        "kworker": 2,
        "runner": 2,
        "bwrap": 4,
        "Web Content": 1,
    }


def test_the_table_ranks_what_local_changes_and_sums_the_rest(cpu_by_command: ModuleType) -> None:
    process = collections.Counter(
        {"python, worker, user": 499, "python, worker, kernel": 0, "temporal": 998, "bwrap": 499}
    )
    process["python, other"] = 100  # a spawner `local` does not have: shown, as a decrease
    local = collections.Counter(
        {"python, worker, user": 998, "python, worker, kernel": 499, "temporal": 998, "bwrap": 1996}
    )
    local.update({f"tool{index}": 1 for index in range(20)})  # more rows than are shown
    lines = cpu_by_command.table_lines({"process": process, "local": local}, 2, 25)
    rows = [line for line in lines if line.startswith("| ") and "---" not in line][1:]
    assert rows[0] == "| bwrap | 1.00 | 4.00 | +3.00 |"  # 1,996 samples at 499 Hz, 1,000 cells
    assert rows[1].startswith("| python, worker, kernel | 0.00 | 1.00 |")
    assert rows[2].startswith("| python, worker, user | 1.00 | 2.00 |")
    assert rows[3] == "| python, other | 0.20 | 0.00 | -0.20 |"
    assert rows[-1] == "| all | 4.20 | 9.04 | +4.84 |"
    assert rows[-2].startswith("| other | ")  # the tools not shown, and temporal (adds nothing)
    assert len(rows) == cpu_by_command.SHOWN + 2
    assert "2 rounds of 500 cells (25 cases" in lines[0]
    assert lines[-1] == (
        "Of what `local` adds, bubblewrap is 0.62 and the worker's own Python (its interpreter "
        "and its system calls) 0.41."
    )


@pytest.mark.serial  # samples the whole machine: no other test may run meanwhile
@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("perf") or not shutil.which("bwrap"),
    reason="needs root, perf and bubblewrap",
)
def test_a_short_real_run_finds_bubblewrap_only_in_local(cpu_by_command: ModuleType) -> None:
    """One case on each provider under the real perf: the worker's rows on both sides, bubblewrap
    only beside `local` (a parse that lost perf's fields, or a run of the wrong provider, fails)."""
    counted = cpu_by_command.measure(rounds=1, cases=1)
    process, local = counted["process"], counted["local"]
    assert process["python, worker, user"] > 0 and local["python, worker, user"] > 0
    assert process["python, worker, kernel"] > 0 and local["python, worker, kernel"] > 0
    assert local["bwrap"] > 0 and process["bwrap"] == 0
    assert "swapper" not in process and "swapper" not in local
