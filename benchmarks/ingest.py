"""Ingestion benchmark: collecting a run whose transcript is 1 GB keeps the worker's peak RSS
under 150 MB.

A `local` sandbox (bubblewrap, loop-mounted disk) runs an agent that writes a 1 GiB
/out/transcript.jsonl (JSON lines) and an answer. Then a fresh subprocess does only the collect
stage, exactly as a worker would: `RunActivities.collect` (workflows/engine/activities.py: attach
through the real provider, stream /out and the world's changes with workflows/engine/collect.py,
redact secrets, commit to the blob store), run in Temporal's ActivityEnvironment. It reports its
peak RSS (VmHWM from /proc/self/status; ru_maxrss agrees) before and after, and the time taken.
With `--backend s3` the blob store is an S3 bucket on moto's S3 server (real HTTP, started here
as a subprocess): the collect stage then also uploads the transcript, in parts, streamed from disk
(workflows/blobs/s3.py). Needs root (the local provider). `--write` records the figures in
benchmarks/RESULTS.md (section `ingest-<backend>`). Usage:

    .venv/bin/python benchmarks/ingest.py [--size-mb 1024] [--limit-mb 150] [--backend s3] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

AGENT_TOML = """
[build]
setup = "true"
[run]
command = "sh write.sh"
timeout_s = 600
[sandbox]
memory_mb = 256
disk_mb = {disk_mb}
"""
WRITER = """#!/bin/sh
# JSON lines, 1 KiB each, until SIZE_MB MiB: a long agent transcript.
line='{"kind":"step","tool":"search","text":"'$(head -c 960 /dev/zero | tr '\\0' 'x')'"}'
yes "$line" | head -c $((SIZE_MB * 1048576)) > "$EVALBOT_OUT_DIR/transcript.jsonl"
echo "The answer is 42." > "$EVALBOT_OUT_DIR/answer.md"
"""
SECRET = "sk-ingest-benchmark-0123456789abcdef"  # the redactor scans every byte for it
SECTION = "ingest-{backend}"


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def settings_for(root: Path):  # type: ignore[no-untyped-def]
    from workflows.settings import Settings

    blob = json.loads(os.environ.get("INGEST_BLOB_SETTINGS", "{}"))  # set by --backend s3
    return Settings(
        data_dir=root / "state",
        catalog_root=root / "catalog",
        judge={"api_key": SECRET},
        store=blob,
    )


def write_catalog(root: Path) -> None:
    world = root / "worlds" / "ingest"
    (world / "documents").mkdir(parents=True)
    (world / "world.toml").write_text('name = "ingest"\n')
    (world / "documents" / "fact.md").write_text("The answer is 42.\n")
    case = root / "datasets" / "ingest" / "cases" / "big"
    case.mkdir(parents=True)
    (case.parent.parent / "dataset.toml").write_text('name = "ingest"\nworld = "ingest"\n')
    (case / "case.toml").write_text(
        'prompt = "?"\n[[criteria]]\nname = "a"\ngrader = "contains_all"\n'
        'params = { values = ["42"] }\n'
    )


# -- the collect stage, alone, in its own process --------------------------------------------


def child(root: Path, sandbox_id: str) -> None:
    from temporalio.testing import ActivityEnvironment

    from workflows.engine.activities import RunActivities
    from workflows.engine.grading import CaseGrader
    from workflows.engine.types import CollectInput
    from workflows.providers import create_provider

    settings = settings_for(root)
    activities = RunActivities(settings, create_provider(settings), store=None, grader=CaseGrader())  # type: ignore[arg-type]
    before = peak_rss_mb()
    started = time.perf_counter()
    job = CollectInput("ingest/big/arm/0", sandbox_id, "ingest", "big")
    result = asyncio.run(ActivityEnvironment().run(activities.collect, job))
    elapsed = time.perf_counter() - started
    collected = activities.blobs.size(result.outputs_ref, "out/transcript.jsonl")
    print(
        json.dumps(
            {
                "peak_rss_mb_before": round(before, 1),
                "peak_rss_mb": round(peak_rss_mb(), 1),
                "ru_maxrss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "seconds": round(elapsed, 1),
                "collected_bytes": collected,
                "blob_store": activities.blobs.url.split("://")[0],
                "has_answer": result.has_answer,
            }
        )
    )


# -- the parent: build, run the agent, then measure the child ---------------------------------


async def run_agent(root: Path, size_mb: int) -> str:
    from workflows.engine.repos import commit_all, init_repo
    from workflows.providers import create_provider
    from workflows.providers.base import ResourceLimits, SandboxSpec

    settings = settings_for(root)
    repo = root / "agent"
    repo.mkdir()
    init_repo(repo)
    (repo / "evalbot.toml").write_text(AGENT_TOML.format(disk_mb=size_mb + 64))
    (repo / "write.sh").write_text(WRITER)
    commit = commit_all(repo, "writer")
    provider = create_provider(settings)
    image = await provider.build_image(repo, commit, "true")
    limits = ResourceLimits(
        memory_mb=256, disk_mb=size_mb + 64, file_size_mb=size_mb + 16, wall_timeout_s=600
    )
    spec = SandboxSpec(
        run_id="ingest/big/arm/0",
        image=image,
        world_dir=root / "catalog" / "worlds" / "ingest",
        case_files={"case.json": b"{}"},
        limits=limits,
        env={"SIZE_MB": str(size_mb)},
    )
    sandbox = await provider.create(spec)
    await sandbox.start("sh write.sh")
    while True:
        state = json.loads(await sandbox.read_file("/out/.state.json"))
        if state.get("status") == "finished":
            break
        await asyncio.sleep(0.5)
    if state.get("exit_code") != 0:
        raise SystemExit(f"the writer failed: {state}")
    return sandbox.id


async def terminate(root: Path, sandbox_id: str) -> None:
    from workflows.providers import create_provider

    sandbox = await create_provider(settings_for(root)).attach(sandbox_id)
    await sandbox.terminate()


def main(size_mb: int, limit_mb: float, backend: str, write: bool) -> int:
    with tempfile.TemporaryDirectory(prefix="evalbot-ingest-") as folder, blob_backend(backend):
        root = Path(folder)
        write_catalog(root / "catalog")
        started = time.perf_counter()
        sandbox_id = asyncio.run(run_agent(root, size_mb))
        wrote = time.perf_counter() - started
        try:
            done = subprocess.run(
                [sys.executable, __file__, "--child", str(root), sandbox_id],
                capture_output=True,
                text=True,
                check=False,
                env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
            )
        finally:
            asyncio.run(terminate(root, sandbox_id))
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
        return 1
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    expected = size_mb * 1024 * 1024
    ok = figures["peak_rss_mb"] < limit_mb and figures["collected_bytes"] == expected
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores")
    print(f"transcript: {size_mb} MiB written by the agent in {wrote:.1f} s (local sandbox)")
    print(
        f"collect stage ({backend} blob store): {figures['collected_bytes'] / 2**20:.0f} MiB "
        f"collected, redacted and stored in {figures['seconds']:.1f} s"
    )
    print(
        f"worker peak RSS: {figures['peak_rss_mb']:.1f} MB (VmHWM; ru_maxrss "
        f"{figures['ru_maxrss_mb']:.1f} MB; {figures['peak_rss_mb_before']:.1f} MB before "
        f"collecting) — limit {limit_mb:.0f} MB: {'PASS' if ok else 'FAIL'}"
    )
    if write:
        record(backend, size_mb, limit_mb, figures, ok)
    return 0 if ok else 1


@contextlib.contextmanager
def blob_backend(backend: str) -> Iterator[None]:
    """`local`: the default folder. `s3`: moto's S3 server (a subprocess, real HTTP), a bucket
    on it, and the settings and AWS variables the child process reads."""
    if backend == "local":
        yield
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.support.s3 import CREDENTIALS, S3Server

    with S3Server() as server:
        server.create_bucket("ingest")
        blob = {"blob_url": "s3://ingest/runs", "blob_endpoint_url": server.url}
        saved = dict(os.environ)
        os.environ.update({**CREDENTIALS, "INGEST_BLOB_SETTINGS": json.dumps(blob)})
        try:
            yield
        finally:
            os.environ.clear()
            os.environ.update(saved)


def record(backend: str, size_mb: int, limit_mb: float, figures: dict[str, Any], ok: bool) -> None:
    from results_file import write_section

    where = "an S3 bucket on moto's server (real HTTP)" if backend == "s3" else "the local folder"
    row = " | ".join(
        [
            datetime.date.today().isoformat(),
            f"{os.cpu_count()}-core {platform.machine()}",
            f"{size_mb:,} MiB",
            f"{figures['seconds']:.1f} s",
            f"{figures['peak_rss_mb_before']:.1f} MB",
            f"{figures['peak_rss_mb']:.1f} MB",
            f"{limit_mb:.0f} MB: {'pass' if ok else 'FAIL'}",
        ]
    )
    from workflows.blobs.s3 import PART_BYTES, PART_CONCURRENCY

    load = os.getloadavg()[0]
    text = f"""## Ingestion, {backend} blob store (benchmarks/ingest.py --backend {backend})

`.venv/bin/python benchmarks/ingest.py --backend {backend} --write` — as the ingestion benchmark
above, with the run's outputs stored in {where}. The collect stage streams the sandbox's files
to disk and redacts them, then uploads each in parts streamed from disk (workflows/blobs/s3.py:
{PART_BYTES >> 20} MiB parts, {PART_CONCURRENCY} in flight). The time depends on the S3 server
(here moto, a Python server keeping objects in memory) and on the machine's load (load average
{load:.1f} at the end).

| date | machine | transcript | collect time | peak RSS before collecting | peak RSS after | limit |
|---|---|---:|---:|---:|---:|---:|
| {row} |
"""
    write_section(SECTION.format(backend=backend), text)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]), sys.argv[3])
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--limit-mb", type=float, default=150.0)
    parser.add_argument("--backend", choices=("local", "s3"), default="local")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    options = parser.parse_args()
    sys.exit(main(options.size_mb, options.limit_mb, options.backend, options.write))
