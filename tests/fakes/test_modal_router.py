"""The Modal test server's exec output streaming (tests/fakes/modal_server/router.py): an exec's
output is complete before its exit status is reported, whatever the timing between the agent that
writes both and the router that reads them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.fakes.modal_server.router import tail_output


async def collect(path: Path, offset: int, finished: Callable[[], bool]) -> bytes:
    return b"".join([chunk async for chunk in tail_output(path, offset, finished)])


async def test_output_that_appears_with_the_status_between_two_looks_is_sent(
    tmp_path: Path,
) -> None:
    """The race seen under load: the filesystem tool creates its output file, writes it and
    records exit 0 after the router found no file but before it looked at the status. Reading
    before looking at the status sent nothing (the SDK's `stat` then parsed an empty stdout)."""
    path = tmp_path / "e1.out"

    def finished() -> bool:  # the exec completes right here, output first, then its status
        path.write_bytes(b'{"name": "x"}')
        return True

    assert await collect(path, 0, finished) == b'{"name": "x"}'


async def test_output_written_while_running_is_streamed_from_the_offset(tmp_path: Path) -> None:
    path = tmp_path / "e2.out"
    looks = 0

    def finished() -> bool:
        nonlocal looks
        looks += 1
        if looks == 1:
            return False  # no file yet
        if looks == 2:
            path.write_bytes(b"skip-first part")
            return False
        with path.open("ab") as handle:
            handle.write(b" last")
        return True

    assert await collect(path, 5, finished) == b"first part last"


async def test_an_exec_without_output_ends_with_its_status(tmp_path: Path) -> None:
    assert await collect(tmp_path / "never.out", 0, lambda: True) == b""
