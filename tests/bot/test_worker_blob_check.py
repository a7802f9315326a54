"""`evalbot worker` with a blob store it cannot use stops at start, before serving any task, with
one sentence naming the store and the fix (a real CLI subprocess; the S3 API is moto's server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import evalbot
from tests.support.s3 import CREDENTIALS, S3Server

REPO_ROOT = Path(__file__).resolve().parents[2]


def _worker(tmp_path: Path, env: dict[str, str]) -> tuple[int, str, str]:
    process = {"EVALBOT_PROVIDER": "process", "EVALBOT_ALLOW_PROCESS_PROVIDER": "true"}
    done = evalbot(tmp_path / "data", REPO_ROOT, "worker", env=process | env)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize(
    ("credentials", "problem"),
    [
        (CREDENTIALS, "bucket 'no-such-bucket' does not exist; create it or fix EVALBOT_BLOB_URL"),
        (
            {"AWS_ACCESS_KEY_ID": "id-only", "AWS_SECRET_ACCESS_KEY": ""},
            "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not; set both",
        ),
    ],
    ids=["missing-bucket", "missing-secret-key"],
)
def test_a_worker_refuses_to_start_on_a_blob_store_it_cannot_use(
    tmp_path: Path, s3_server: S3Server, credentials: dict[str, str], problem: str
) -> None:
    code, out, err = _worker(
        tmp_path,
        {
            "EVALBOT_BLOB_URL": "s3://no-such-bucket/runs",
            "EVALBOT_BLOB_ENDPOINT_URL": s3_server.url,
            **credentials,
        },
    )
    assert code == 1, (out, err)
    assert "serving" not in out  # no worker ever ran
    lines = err.strip().splitlines()
    assert len(lines) == 1 and problem in lines[0], err
    assert "s3://no-such-bucket/runs" in lines[0]
