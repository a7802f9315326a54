"""Collecting a finished sandbox: every /out file copied byte for byte (small ones in one write,
large ones chunk by chunk), and of the world only what changed."""

from __future__ import annotations

import json
import os
from pathlib import Path

from workflows.catalog.hashing import tree_hashes
from workflows.engine.collect import SMALL_FILE_BYTES, collect_outputs
from workflows.providers.base import SandboxSpec
from workflows.providers.process import ProcessProvider


async def test_out_is_copied_whole_and_only_world_changes_are_kept(tmp_path: Path) -> None:
    world = tmp_path / "world"
    (world / "docs").mkdir(parents=True)
    for name in ("same.md", "edited.md", "removed.md"):
        (world / "docs" / name).write_text(f"pristine {name}\n")
    (tmp_path / "repo").mkdir()
    provider = ProcessProvider(tmp_path / "sandboxes", tmp_path / "images", allowed=True)
    spec = SandboxSpec(
        run_id="e/c/a/0", image=str(tmp_path / "repo"), world_dir=world, case_files={}
    )
    sandbox = await provider.create(spec)

    big = os.urandom(SMALL_FILE_BYTES * 2 + 123)  # crosses from buffering to streaming
    await sandbox.write_file("/out/answer.md", b"the answer\n")
    await sandbox.write_file("/out/logs/big.bin", big)
    await sandbox.write_file("/out/usage.json", json.dumps({"cost_usd": 0.5}).encode())
    await sandbox.write_file("/world/docs/edited.md", b"edited by the agent\n")
    await sandbox.write_file("/world/docs/new.md", b"created by the agent\n")
    (sandbox.layout.world / "docs" / "removed.md").unlink()

    staging = tmp_path / "staging"
    collected = await collect_outputs(sandbox, staging, tree_hashes(world))

    assert (staging / "out" / "answer.md").read_bytes() == b"the answer\n"
    assert (staging / "out" / "logs" / "big.bin").read_bytes() == big
    changes = staging / "world_changes"
    assert sorted(p.relative_to(changes).as_posix() for p in changes.rglob("*.md")) == [
        "docs/edited.md",
        "docs/new.md",
    ]
    assert (changes / "docs" / "edited.md").read_bytes() == b"edited by the agent\n"
    assert json.loads((staging / "world_deleted.json").read_text()) == ["docs/removed.md"]
    assert collected.has_answer
    assert collected.usage.cost_usd == 0.5
