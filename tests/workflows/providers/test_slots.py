"""uid claims: a claim whose sandbox never came to exist is freed at once when the process that
claimed it is gone, else only after a grace period (a create in progress elsewhere has claimed
its uid but not yet made its folder)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from workflows.providers.local.slots import UidSlots


def test_reap_frees_only_old_claims_of_sandboxes_that_do_not_exist(tmp_path: Path) -> None:
    sandboxes = tmp_path / "sandboxes"
    slots = UidSlots(sandboxes / ".uids", base=100_000, count=1_000)
    alive, orphan, young = slots.claim("alive-1"), slots.claim("orphan-1"), slots.claim("young-1")
    (sandboxes / "alive-1").mkdir()
    old = time.time() - 120
    for uid in (alive, orphan):
        os.utime(sandboxes / ".uids" / str(uid), (old, old))

    freed = slots.reap(lambda owner: (sandboxes / owner).exists(), grace_s=60)

    assert freed == [orphan]
    remaining = sorted(int(p.name) for p in (sandboxes / ".uids").iterdir())
    assert remaining == sorted([alive, young])
    assert slots.claim("next") not in (alive, young)  # live claims are never handed out twice


def test_a_claim_of_a_process_that_is_gone_is_freed_without_waiting(tmp_path: Path) -> None:
    sandboxes = tmp_path / "sandboxes"
    slots = UidSlots(sandboxes / ".uids", base=100_000, count=1_000)
    claim_and_die = (
        "import sys; from pathlib import Path; from workflows.providers.local.slots import "
        "UidSlots; print(UidSlots(Path(sys.argv[1]), 100_000, 1_000).claim('killed-1'))"
    )
    dead = int(
        subprocess.run(
            [sys.executable, "-c", claim_and_die, str(sandboxes / ".uids")],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    young = slots.claim("young-1")  # this process runs: its create may be in progress
    reused = slots.claim("reused-1")  # a claim whose pid now names another process
    claim = sandboxes / ".uids" / str(reused)
    claim.write_text(claim.read_text().rsplit("-", 1)[0] + "-1")

    freed = slots.reap(lambda owner: (sandboxes / owner).exists(), grace_s=60)

    assert sorted(freed) == sorted([dead, reused])
    assert sorted(int(p.name) for p in (sandboxes / ".uids").iterdir()) == [young]
