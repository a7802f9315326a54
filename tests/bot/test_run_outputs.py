"""The dashboard's reader of run outputs, on both blob stores: the answer preview is one ranged
read (a 1 MiB answer shows its first 16 KiB, marked truncated); a run with no outputs shows none."""

from __future__ import annotations

from typing import Any

import pytest

from bot.dashboard.run_outputs import ANSWER_PREVIEW_BYTES, answer_of, transcript_name
from tests.support.experiments import make_spec, scored_run
from workflows.blobs import BlobStore, open_blob_store
from workflows.settings import Settings


@pytest.fixture(params=["local", "s3"])
def blobs(request: pytest.FixtureRequest, settings: Settings) -> BlobStore:
    changes: dict[str, Any] = request.getfixturevalue("s3_bucket") if request.param == "s3" else {}
    return open_blob_store(settings.with_changes(**changes))


def test_a_large_answer_is_previewed_from_its_start(blobs: BlobStore) -> None:
    run = scored_run(make_spec(n_cases=1, trials=1), 0, "main", 0, {"accuracy": 1.0})
    staging = blobs.staging(run.run_id)
    (staging / "out").mkdir()
    (staging / "out" / "answer.json").write_bytes(b"a" * ANSWER_PREVIEW_BYTES + b"b" * (1 << 20))
    run = run.model_copy(update={"outputs_ref": blobs.commit(run.run_id, staging)})
    assert answer_of(blobs, run) == "a" * ANSWER_PREVIEW_BYTES + "\n…(truncated)"
    assert transcript_name(blobs, run) is None
    assert answer_of(blobs, run.model_copy(update={"outputs_ref": ""})) == ""
