"""uid claims: a claim whose sandbox never came to exist is freed at once when the process that
claimed it is gone, else only after a grace period (a create in progress elsewhere has claimed
its uid but not yet made its folder); and the claims are the host's, shared by instances with
their own folders of sandboxes.

Broken builds caught: claims kept per data folder (two instances hand out one uid); a reap that
looks for another instance's sandbox in its own folder (it frees that instance's live claims)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workflows.providers.base import SandboxCreateError
from workflows.providers.local.slots import UidSlots


def test_reap_frees_only_old_claims_of_sandboxes_that_do_not_exist(tmp_path: Path) -> None:
    sandboxes = tmp_path / "sandboxes"
    slots = UidSlots(tmp_path / "uids", base=100_000, count=1_000, home=sandboxes)
    alive, orphan, young = slots.claim("alive-1"), slots.claim("orphan-1"), slots.claim("young-1")
    (sandboxes / "alive-1").mkdir(parents=True)
    old = time.time() - 120
    for uid in (alive, orphan):
        os.utime(tmp_path / "uids" / str(uid), (old, old))

    freed = slots.reap(grace_s=60)

    assert freed == [orphan]
    remaining = sorted(int(p.name) for p in (tmp_path / "uids").iterdir())
    assert remaining == sorted([alive, young])
    assert slots.claim("next") not in (alive, young)  # live claims are never handed out twice


def test_a_claim_of_a_process_that_is_gone_is_freed_without_waiting(tmp_path: Path) -> None:
    sandboxes = tmp_path / "sandboxes"
    slots = UidSlots(tmp_path / "uids", base=100_000, count=1_000, home=sandboxes)
    claim_and_die = (
        "import sys; from pathlib import Path; from workflows.providers.local.slots import "
        "UidSlots; print(UidSlots(Path(sys.argv[1]), 100_000, 1_000, Path(sys.argv[2]))"
        ".claim('killed-1'))"
    )
    dead = int(
        subprocess.run(
            [sys.executable, "-c", claim_and_die, str(tmp_path / "uids"), str(sandboxes)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    young = slots.claim("young-1")  # this process runs: its create may be in progress
    reused = slots.claim("reused-1")  # a claim whose pid now names another process
    claim = tmp_path / "uids" / str(reused)
    owner, process, home = claim.read_text().split("\n")
    claim.write_text(f"{owner}\n{process.rsplit('-', 1)[0]}-1\n{home}")

    freed = slots.reap(grace_s=60)

    assert sorted(freed) == sorted([dead, reused])
    assert sorted(int(p.name) for p in (tmp_path / "uids").iterdir()) == [young]


def test_two_instances_share_the_hosts_uids(tmp_path: Path) -> None:
    """Two data folders on one host: one uid is never live in both, and each reaps only what is
    dead in either."""
    uids = tmp_path / "uids"
    first = UidSlots(uids, base=100_000, count=3, home=tmp_path / "first")
    second = UidSlots(uids, base=100_000, count=3, home=tmp_path / "second")
    mine = first.claim("run-a")
    (tmp_path / "first" / "run-a").mkdir(parents=True)
    theirs = second.claim("run-b")
    (tmp_path / "second" / "run-b").mkdir(parents=True)
    their_orphan = second.claim("run-c")  # its sandbox folder was never made
    assert len({mine, theirs, their_orphan}) == 3
    with pytest.raises(SandboxCreateError, match="all 3 sandbox uids are in use"):
        first.claim("run-d")

    old = time.time() - 120
    for uid in (mine, theirs, their_orphan):
        os.utime(uids / str(uid), (old, old))
    assert first.reap(grace_s=60) == [their_orphan]  # run-b lives in second's folder, not first's

    first.release(theirs, "run-b")  # not first's to free, though the id matches
    assert second.uid_of("run-b") == theirs and first.uid_of("run-b") is None
    second.release(theirs, "run-b")
    assert first.claim("run-e") in (theirs, their_orphan)


def test_a_claim_being_written_and_stray_files_are_left_alone(tmp_path: Path) -> None:
    """`claim` creates its file, then writes it: a reap in between must neither free the uid
    nor fail, and a stray file whose name starts with a digit is no claim."""
    slots = UidSlots(tmp_path / "uids", base=100_000, count=1_000, home=tmp_path / "sandboxes")
    slots.claim("first")  # makes the folder
    being_written, stray = tmp_path / "uids" / "100500", tmp_path / "uids" / "1x"
    being_written.touch()
    stray.write_text("not a claim")
    old = time.time() - 120
    for path in (being_written, stray):
        os.utime(path, (old, old))

    assert slots.reap(grace_s=60) == []
    assert being_written.exists() and stray.exists()
    assert [claim.owner for claim in slots.claims()] == ["first"]
