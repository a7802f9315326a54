"""uid claims: a claim whose sandbox never came to exist is freed, but only after a grace period
(a create in progress elsewhere has claimed its uid but not yet made its folder)."""

from __future__ import annotations

import os
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
