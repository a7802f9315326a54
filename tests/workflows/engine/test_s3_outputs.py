"""One experiment on another host's terms: the process provider, the Temporal dev server, and the
runs' outputs in an S3 bucket (moto over real HTTP). The store holds keys, no host path; the
outputs are read back from the bucket by the dashboard's reader and by `evalbot regrade`."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner
from sqlalchemy import select

from bot.commands.regrade import regrade_command
from bot.dashboard.run_outputs import answer_of, stream_file, transcript_name
from tests.support.agent_repo import AgentRepo
from tests.workflows.engine.test_experiment import run_tiny
from workflows.blobs import BlobStore, open_blob_store, safe_key
from workflows.blobs.s3 import S3BlobStore
from workflows.records import RunStatus
from workflows.settings import Settings
from workflows.store.tables import runs


async def test_an_experiment_stores_its_outputs_in_s3_and_reads_them_back(
    engine_settings: Settings, agent_repo: AgentRepo, s3_bucket: dict[str, Any]
) -> None:
    settings = engine_settings.with_changes(
        sandbox={"provider": "process", "allow_process_provider": True}, **s3_bucket
    )
    store, spec = await run_tiny(settings, agent_repo, trials=1, cases=["consent-draft"])
    stored = store.list_runs(spec.experiment_id)
    assert {r.status for r in stored} == {RunStatus.SCORED}, [(r.run_id, r.error) for r in stored]

    with store._engine.connect() as connection:  # the table itself: keys, never host paths
        refs = dict(connection.execute(select(runs.c.run_id, runs.c.outputs_ref)).all())
    assert refs == {run_id: safe_key(run_id) for run_id in refs} and len(refs) == 2
    assert not any(ref.startswith("/") or str(settings.data_dir) in ref for ref in refs.values())
    on_disk = [p for p in settings.blob_dir.rglob("*") if p.is_file()]
    assert on_disk == []  # staging is gone once uploaded: the bucket holds the only copy

    blobs = open_blob_store(settings)
    assert isinstance(blobs, S3BlobStore)
    for run in stored:
        assert answer_of(blobs, run)  # the dashboard's preview, a ranged read from the bucket
        with blobs.local_copy(run.outputs_ref) as folder:
            changed = sorted(
                p.relative_to(folder / "world_changes").as_posix()
                for p in (folder / "world_changes").rglob("*")
                if p.is_file()
            )
        assert changed == (["drafts/consent-request.md"] if run.arm == "head" else [])
    name = transcript_name(blobs, stored[0])
    assert name == "out/transcript.jsonl"
    streamed = await _read(blobs, stored[0].outputs_ref, name)  # the transcript view
    with blobs.local_copy(stored[0].outputs_ref) as folder:
        assert streamed == (folder / name).read_bytes() and streamed

    result = CliRunner().invoke(regrade_command, [spec.experiment_id, "--json"], obj=settings)
    assert result.exit_code == 0, result.output
    regraded = json.loads(result.output)
    assert (regraded["regraded"], regraded["failures"]) == (2, [])
    assert [p for p in settings.blob_dir.rglob("*") if p.is_file()] == []  # copies removed


async def _read(blobs: BlobStore, key: str, name: str) -> bytes:
    return b"".join([chunk async for chunk in stream_file(blobs, key, name)])
