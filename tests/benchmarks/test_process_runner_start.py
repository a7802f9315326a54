"""benchmarks/process_runner_start.py: a short real run starts runners both ways, in alternating
blocks, and every run finishes. Broken builds caught: a way that never runs (its list is empty),
one whose runner never finishes (the script waits on its state, then the test times out), or
blocks that do not alternate."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")), reason="no C compiler"),
]


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import process_runner_start

    return process_runner_start


async def test_both_ways_run_in_alternating_blocks(script: ModuleType, tmp_path: Path) -> None:
    order: list[object] = []
    one_run = script.one_run

    async def noted(spawner: object, native: object, out: Path) -> None:
        order.append(native is not None)
        await one_run(spawner, native, out)

    script.one_run = noted
    try:
        timings = await script.measure(2, 2, tmp_path)
    finally:
        script.one_run = one_run
    assert order == [False] * 2 + [True] * 4 + [False] * 2  # AB BA
    assert sorted(timings) == sorted(script.WAYS)
    assert all(len(walls) == 2 and min(walls) > 0 for walls, _ in timings.values())
    finished = list(tmp_path.glob("run-*/.state.json"))
    assert len(finished) == 8 and all(b'"finished"' in f.read_bytes() for f in finished)
