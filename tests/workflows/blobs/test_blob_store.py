"""The blob store's two backends behave alike: the local folder and an S3 bucket (moto's server
over real HTTP, through the real client). Keys, never host paths; ranged and streamed reads;
large files uploaded in parts; a bad bucket refused at the start check in one sentence."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import obstore
import pytest

from tests.fakes.s3_refusing import ACCESS_DENIED, RefusingS3
from tests.support.s3 import S3Server
from workflows.blobs import BlobStore, BlobStoreError, LocalBlobStore, open_blob_store
from workflows.blobs.s3 import PART_BYTES, S3BlobStore
from workflows.blobs.staging import process_folder
from workflows.file_systems import file_system_of, spreads_subfolders
from workflows.settings import Settings

RUN_ID = "exp-1/case a/arm/0"
KEY = "exp-1/case_a/arm/0"


@pytest.fixture(params=["local", "s3"])
def blobs(request: pytest.FixtureRequest, settings: Settings) -> BlobStore:
    if request.param == "local":
        return open_blob_store(settings)
    changes: dict[str, Any] = request.getfixturevalue("s3_bucket")
    return open_blob_store(settings.with_changes(**changes))


def _stage(blobs: BlobStore, files: dict[str, bytes]) -> Path:
    staging = blobs.staging(RUN_ID)
    for name, data in files.items():
        (staging / name).parent.mkdir(parents=True, exist_ok=True)
        (staging / name).write_bytes(data)
    return staging


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


async def _read_all(blobs: BlobStore, key: str, name: str) -> bytes:
    return b"".join([chunk async for chunk in blobs.iter_bytes(key, name, 7)])


def test_a_commit_is_read_back_by_key_and_a_second_replaces_it(blobs: BlobStore) -> None:
    first = {"out/answer.md": b"42", "out/old.txt": b"gone later", "world_deleted.json": b"[]"}
    key = blobs.commit(RUN_ID, _stage(blobs, first))
    assert key == KEY  # a key, never a host path
    with blobs.local_copy(key) as folder:
        assert _tree(folder) == first
    second = {"out/answer.md": b"43", "world_changes/a.txt": b"new"}
    assert blobs.commit(RUN_ID, _stage(blobs, second)) == KEY
    with blobs.local_copy(KEY) as folder:
        assert _tree(folder) == second


def test_reads_are_ranged_and_streamed(blobs: BlobStore) -> None:
    data = bytes(range(256)) * 40
    blobs.commit(RUN_ID, _stage(blobs, {"out/transcript.jsonl": data}))
    assert blobs.size(KEY, "out/transcript.jsonl") == len(data)
    assert blobs.read_range(KEY, "out/transcript.jsonl", 100, 50) == data[100:150]
    assert blobs.read_range(KEY, "out/transcript.jsonl", len(data) - 3, 50) == data[-3:]
    assert blobs.size(KEY, "out/missing") is None
    assert blobs.read_range(KEY, "out/missing", 0, 10) is None
    assert asyncio.run(_read_all(blobs, KEY, "out/transcript.jsonl")) == data


def test_an_empty_file_reads_as_empty_not_missing(blobs: BlobStore) -> None:
    blobs.commit(RUN_ID, _stage(blobs, {"out/answer.md": b""}))
    assert blobs.read_range(KEY, "out/answer.md", 0, 10) == b""


def test_names_cannot_leave_the_key(blobs: BlobStore) -> None:
    with pytest.raises(ValueError):
        blobs.read_range(KEY, "../other/out/answer.md", 0, 10)


def test_a_large_file_is_uploaded_in_parts(
    settings: Settings, s3_bucket: dict[str, Any], tmp_path: Path
) -> None:
    blobs = open_blob_store(settings.with_changes(**s3_bucket))
    assert isinstance(blobs, S3BlobStore)
    data = b"x" * (2 * PART_BYTES + 123)
    blobs.commit(RUN_ID, _stage(blobs, {"out/transcript.jsonl": data}))
    meta = obstore.head(blobs._store, f"{KEY}/out/transcript.jsonl")
    assert meta["size"] == len(data)
    assert str(meta["e_tag"]).strip('"').endswith("-3")  # a multipart upload of three parts
    assert blobs.read_range(KEY, "out/transcript.jsonl", PART_BYTES - 1, 3) == b"xxx"


def test_the_check_passes_on_a_good_bucket(blobs: BlobStore) -> None:
    blobs.check()
    with blobs.local_copy("nothing/here") as folder:
        assert _tree(folder) == {}


def _s3(settings: Settings, server: S3Server, bucket: str) -> BlobStore:
    return open_blob_store(
        settings.with_changes(
            store={"blob_url": f"s3://{bucket}/p", "blob_endpoint_url": server.url}
        )
    )


def test_a_missing_bucket_is_named(
    settings: Settings, s3_bucket: dict[str, Any], s3_server: S3Server
) -> None:
    with pytest.raises(BlobStoreError) as caught:
        _s3(settings, s3_server, "no-such-bucket").check()
    assert str(caught.value) == (
        "the blob store s3://no-such-bucket/p cannot be used: bucket 'no-such-bucket' does not "
        "exist; create it or fix EVALBOT_BLOB_URL"
    )


def test_a_missing_secret_key_is_named(
    settings: Settings,
    s3_bucket: dict[str, Any],
    s3_server: S3Server,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(BlobStoreError, match="AWS_SECRET_ACCESS_KEY is not; set both"):
        _s3(settings, s3_server, "any")  # refused when built, before any request


def free_port_containing_403() -> int:
    """A port nobody listens on whose number holds "403": the URL is in the client's message."""
    for port in [*range(40300, 40400), *range(1403, 65536, 1000)]:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port containing 403")


def test_an_unreachable_endpoint_is_named(
    settings: Settings, s3_bucket: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not "credentials refused" because the port's digits hold 403 (a CI failure)."""
    dead = f"http://127.0.0.1:{free_port_containing_403()}"
    store = open_blob_store(
        settings.with_changes(store={"blob_url": "s3://b/p", "blob_endpoint_url": dead})
    )
    with pytest.raises(BlobStoreError) as caught:
        store.check()
    assert str(caught.value) == (
        f"the blob store s3://b/p cannot be used: {dead} is unreachable; check "
        "EVALBOT_BLOB_ENDPOINT_URL and the network"
    )
    assert "testing-secret-key" not in str(caught.value)


@pytest.mark.parametrize("body", [ACCESS_DENIED, b""], ids=["s3-error", "status-only"])
def test_refused_credentials_are_named(
    settings: Settings, s3_bucket: dict[str, Any], body: bytes
) -> None:
    refusing = RefusingS3(body).start()
    try:
        store = open_blob_store(
            settings.with_changes(
                store={"blob_url": "s3://b/p", "blob_endpoint_url": refusing.root}
            )
        )
        with pytest.raises(BlobStoreError) as caught:
            store.check()
    finally:
        refusing.stop()
    assert refusing.requests  # the check reached the endpoint
    assert str(caught.value) == (
        "the blob store s3://b/p cannot be used: the credentials were refused for bucket 'b'; "
        "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
    )


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("s3://", "names no bucket"),
        ("gs://bucket", "is neither s3://bucket/prefix nor file:///path"),
        ("file://host/x", "names a host"),
    ],
)
def test_bad_urls_are_refused_in_one_sentence(settings: Settings, url: str, problem: str) -> None:
    with pytest.raises(BlobStoreError, match=problem):
        open_blob_store(settings.with_changes(store={"blob_url": url}))


def test_a_file_url_names_the_local_folder(settings: Settings, tmp_path: Path) -> None:
    store = open_blob_store(settings.with_changes(store={"blob_url": (tmp_path / "b").as_uri()}))
    assert isinstance(store, LocalBlobStore) and store.root == tmp_path / "b"
    assert isinstance(open_blob_store(settings), LocalBlobStore)


def test_each_experiments_outputs_are_staged_and_kept_apart_on_the_disk(settings: Settings) -> None:
    """ext4 puts each experiment's staging folder, and its folder of finished outputs, in a block
    group of its own (workflows/file_systems.py): the folders above them carry the attribute."""
    blobs = open_blob_store(settings)
    assert isinstance(blobs, LocalBlobStore)
    blobs.commit(RUN_ID, _stage(blobs, {"out/answer.md": b"42"}))
    if file_system_of(str(blobs.root)).kind != "ext4":
        pytest.skip("only ext4 has the attribute")
    assert spreads_subfolders(process_folder(blobs.root)) and spreads_subfolders(blobs.root)
    assert not spreads_subfolders(blobs.prefix(RUN_ID).parents[2])  # the experiment's folder


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_staging_left_by_a_killed_worker_is_reaped_and_a_live_ones_kept(
    backend: str, settings: Settings, request: pytest.FixtureRequest
) -> None:
    """A worker killed mid-collect leaves its staging folder; the next worker's start removes
    it, but never the staging of a worker still running on the host (this process here)."""
    changes: dict[str, Any] = request.getfixturevalue("s3_bucket") if backend == "s3" else {}
    settings = settings.with_changes(**changes)
    blobs = open_blob_store(settings)
    dead = subprocess.run(
        [sys.executable, "-c", STAGE_AND_DIE, str(settings.data_dir), json.dumps(changes)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert Path(dead).is_file()  # what the dead worker staged is there until the reaping
    live = _stage(blobs, {"out/answer.md": b"in progress"})

    reaped = blobs.reap_staging()

    assert len(reaped) == 1 and not Path(dead).exists()
    assert _tree(live) == {"out/answer.md": b"in progress"}
    assert blobs.reap_staging() == []


STAGE_AND_DIE = """
import json, os, sys
from pathlib import Path
from workflows.blobs import open_blob_store
from workflows.settings import Settings
settings = Settings(data_dir=Path(sys.argv[1])).with_changes(**json.loads(sys.argv[2]))
staging = open_blob_store(settings).staging("exp-1/dead/arm/0")
(staging / "stdout.log").write_text("half")
print(staging / "stdout.log", flush=True)
os._exit(0)  # no clean-up, as for a SIGKILL
"""


def test_workers_starting_together_check_the_store_without_tripping_each_other(
    blobs: BlobStore,
) -> None:
    """Each check writes and deletes a probe of its own (one shared name made one worker's
    delete fail another's check: a fork test's two sessions in CI)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        checks = [pool.submit(blobs.check) for _ in range(48)]
    assert [check.exception() for check in checks] == [None] * 48
