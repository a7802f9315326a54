"""The dashboard viewer at scale (issue 25): how big, and how fast in Chromium, is the page of a
2,000-cell experiment, and the transcript page of a large transcript?

Seeds a store (SQLite) and a local blob folder in a temporary directory with one experiment —
`--cases` × 2 arms × `--trials` cells, each with an answer (2 KiB) and three graded criteria, one
cell in 50 errored — and one run whose transcript is `--transcript-mb` MiB of JSON lines. Serves
the dashboard's routers (bot.dashboard.ROUTERS behind its security middleware) with uvicorn on a
loopback port and loads each page in headless Chromium (Debian `chromium`, Playwright) once and
then `--repeat` times. Prints, per page: the HTML bytes, the first load's time (the experiment
page computes its report then; later loads reuse it until the runs change, view_cache.py) and the
median of the others, from navigation start to the load event (server time included). Budgets
(docs/dashboard.md, "Scale"): the experiment page under 500 KB and 1 s. Usage:

    .venv/bin/python benchmarks/viewer.py [--cases 500] [--trials 2] [--transcript-mb 1024]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import uvicorn  # noqa: E402
from fastapi import FastAPI  # noqa: E402
from pydantic import SecretStr  # noqa: E402

from benchmarks.bench_figures import commit  # noqa: E402
from benchmarks.results_file import write_section  # noqa: E402
from bot import dashboard  # noqa: E402
from bot.dashboard.pages import compile_templates  # noqa: E402
from bot.dashboard.security import SecurityMiddleware  # noqa: E402
from workflows.blobs import BlobStore, open_blob_store  # noqa: E402
from workflows.catalog.models import ArmSpec, ExperimentSpec  # noqa: E402
from workflows.records import CriterionScore, RunResult, RunStatus, Usage  # noqa: E402
from workflows.settings import Settings  # noqa: E402
from workflows.store import Store  # noqa: E402

TOKEN = "viewer-benchmark-token"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
CRITERIA = ("accuracy", "citations", "tone")
PAGE_BUDGET_BYTES = 500_000
RENDER_BUDGET_S = 1.0


def seed_experiment(store: Store, blobs: BlobStore, cases: int, trials: int) -> ExperimentSpec:
    spec = ExperimentSpec(
        experiment_id="pr/acme/agent/42",
        repo="/repo",
        dataset="bench",
        case_ids=tuple(f"case-{i:04d}" for i in range(cases)),
        arms=(
            ArmSpec(name="main", ref="main", commit="a" * 40),
            ArmSpec(name="pr", ref="pr", commit="b" * 40),
        ),
        trials=trials,
    )
    store.save_experiment(spec)
    for n, cell in enumerate(spec.cells()):
        store.save_run(_run(spec, cell.case_id, cell.arm, cell.trial, n, blobs))
    store.set_experiment_status(spec.experiment_id, "completed")
    return spec


def _run(
    spec: ExperimentSpec, case: str, arm: str, trial: int, n: int, blobs: BlobStore
) -> RunResult:
    run_id = f"{spec.experiment_id}/{case}/{arm}/{trial}"
    staging = blobs.staging(run_id)
    (staging / "out").mkdir(parents=True)
    (staging / "out" / "answer.md").write_text(f"Answer {n} of {arm}. " * 100)
    base = RunResult(
        run_id=run_id, experiment_id=spec.experiment_id, case_id=case, arm=arm, trial=trial,
        seed=0, status=RunStatus.SCORED, outputs_ref=blobs.commit(run_id, staging),
        usage=Usage(input_tokens=1000, output_tokens=200, cost_usd=0.01), wall_s=12.0,
    )  # fmt: skip
    if n % 50 == 7:
        return base.model_copy(update={"status": RunStatus.SANDBOX_ERROR, "error": "died"})
    value = ((n * 7919) % 100) / 100
    criteria = tuple(
        CriterionScore(name=c, grader="judge", weight=1.0, score=value, rationale=f"{c} ok " * 20)
        for c in CRITERIA
    )
    return base.model_copy(update={"criteria": criteria, "score": value})


def seed_transcript(store: Store, blobs: BlobStore, spec: ExperimentSpec, mib: int) -> str:
    """A run of the experiment whose transcript is `mib` MiB of mixed events."""
    run = store.get_run(f"{spec.experiment_id}/{spec.case_ids[0]}/pr/0")
    assert run is not None
    staging = blobs.staging(run.run_id + "-transcript")
    (staging / "out").mkdir(parents=True)
    block = b"".join(_events(1000))
    with (staging / "out" / "transcript.jsonl").open("wb") as handle:
        for _ in range(max(1, mib * 1024 * 1024 // len(block))):
            handle.write(block)
    ref = blobs.commit(run.run_id + "-transcript", staging)
    store.save_run(run.model_copy(update={"outputs_ref": ref}))
    return run.run_id


def _events(n: int) -> Iterator[bytes]:
    for i in range(n):
        kind = i % 4
        if kind == 0:
            event: dict[str, Any] = {"role": "user", "content": f"question {i} " * 20}
        elif kind == 1:
            call = {"name": "search", "arguments": json.dumps({"q": f"term {i}"})}
            calls = [{"id": f"c{i}", "type": "function", "function": call}]
            event = {"role": "assistant", "content": "thinking " * 30, "tool_calls": calls}
        elif kind == 2:
            event = {"type": "search", "query": f"term {i}", "hits": [
                {"title": f"doc {j}", "path": f"docs/{j}.md", "snippet": "text " * 20}
                for j in range(5)]}  # fmt: skip
        else:
            event = {"type": "tool_result", "call_id": f"c{i}", "output": "result " * 40}
        yield json.dumps({"step": i, "ms": i * 10, **event}).encode() + b"\n"


def dashboard_app(settings: Settings, store: Store) -> FastAPI:
    app = FastAPI()
    app.add_middleware(SecurityMiddleware, settings=settings)
    app.state.settings, app.state.store = settings, store
    app.state.blobs, app.state.launcher = open_blob_store(settings), None
    for router in dashboard.ROUTERS:
        app.include_router(router)
    compile_templates()  # as bot.app.create_app does
    return app


@contextmanager
def serve(app: FastAPI) -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def measure(page: Any, url: str, repeat: int) -> tuple[int, float, float]:
    """(HTML bytes, seconds of the first load, median seconds of `repeat` loads after it), each
    from navigation start to the load event."""
    size, times = 0, []
    for _ in range(repeat + 1):
        started = time.perf_counter()
        response = page.goto(url, wait_until="load")
        elapsed = time.perf_counter() - started
        if response is None or response.status != 200:
            raise SystemExit(f"{url} answered {response.status if response else 'nothing'}")
        size = len(response.body())
        times.append(elapsed)
    return size, times[0], statistics.median(times[1:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--transcript-mb", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    lines: list[str] = []  # what --write puts in RESULTS.md: the lines printed below

    def emit(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="viewer-bench-") as tmp:
        settings = Settings(data_dir=Path(tmp) / "evalbot", catalog_root=Path(tmp)).with_changes(
            dashboard={"token": SecretStr(TOKEN), "insecure_localhost_cookies": True}
        )
        store = Store.from_settings(settings)
        store.migrate()
        blobs = open_blob_store(settings)
        started = time.perf_counter()
        spec = seed_experiment(store, blobs, args.cases, args.trials)
        run_id = seed_transcript(store, blobs, spec, args.transcript_mb)
        stored = store.get_run(run_id)
        size = blobs.size(stored.outputs_ref, "out/transcript.jsonl") if stored else None
        print(f"seeded {len(spec.cells())} cells and a {(size or 0) / 2**20:,.0f} MiB transcript "
              f"in {time.perf_counter() - started:.1f} s")  # fmt: skip
        experiment, transcript = spec.experiment_id, f"/dashboard/runs/{run_id}/transcript"
        pages = {
            "experiment page": f"/dashboard/experiments/{experiment}",
            "experiment page, regressed": f"/dashboard/experiments/{experiment}?show=regressed",
            "one case's answers": f"/dashboard/case?experiment={experiment}&case=case-0001",
            "transcript page": transcript,
            "transcript search, no match (32 MiB scanned)": f"{transcript}?q=zzz",
        }
        with serve(dashboard_app(settings, store)) as url, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            page = browser.new_page()
            page.set_extra_http_headers({"Authorization": f"Bearer {TOKEN}"})
            emit(f"{datetime.date.today()} · {platform.machine()} {os.cpu_count()} cores · "
                 f"load avg {os.getloadavg()[0]:.1f} · commit {commit()}\n")  # fmt: skip
            emit(f"| page | HTML bytes | first load | load (median of the next {args.repeat}) |")
            emit("|---|---:|---:|---:|")
            results = {}
            for name, path in pages.items():
                results[name] = measure(page, url + path, args.repeat)
                size, first, median = results[name]
                emit(f"| {name} | {size:,} | {first * 1000:,.0f} ms | {median * 1000:,.0f} ms |")
            browser.close()
        store.close()
    size, first, later = results["experiment page"]
    checks = {
        f"within {PAGE_BUDGET_BYTES:,} bytes": size < PAGE_BUDGET_BYTES,
        f"first load within {RENDER_BUDGET_S:.0f} s": first < RENDER_BUDGET_S,
        f"later loads within {RENDER_BUDGET_S:.0f} s": later < RENDER_BUDGET_S,
    }
    verdicts = "; ".join(f"{name}: {'yes' if ok else 'NO'}" for name, ok in checks.items())
    emit(f"\nExperiment page {verdicts}.")
    if args.write:
        write_section("viewer", "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
