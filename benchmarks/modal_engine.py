"""Modal through the engine: a whole experiment (100 cases × 4 arms × 5 trials = 2,000 cells, a
trivial agent) on a real Temporal dev server with the real workers and EVALBOT_PROVIDER=modal: the
real `modal` SDK against the Modal test server (tests/fakes/modal_server: Modal's gRPC API, each
sandbox a bubblewrap container), started here as a subprocess, with Modal's published start latency
(2.7 s p50), its default account limit of 5 sandbox creations per second and the ~128-starting
quota, both enforced by the server (it refuses with RESOURCE_EXHAUSTED, which the SDK raises as
ResourceExhaustedError).

Unlike benchmarks/modal.py (the provider alone), every stage here is the engine's: RunWorkflows in
batches, `prepare_arm` building one image per arm, `provision` on its own task queue with Temporal's
server-side rate limit (EVALBOT_PROVISION_RATE_PER_S) in front of the provider's admission control
(EVALBOT_MODAL_CREATES_PER_S token bucket, EVALBOT_MODAL_MAX_STARTING), then execute (poll through
the filesystem API), collect, score, teardown — with every setting at its default unless the
scenario says otherwise.

Prints, per scenario: makespan (start of the experiment to its end, image builds included),
cells/s, the most creations the fake server accepted in any one-second window, peak sandboxes
starting at once (server side), refusals (each retried by the client), provision attempts that gave
up (retried by the stage) and cells lost (sandbox errors), stored results (and that every cell is
stored exactly once, with exactly one sandbox), sandboxes left running, provision time p50/p95.
Usage:

    .venv/bin/python benchmarks/modal_engine.py                      # the sweep
    .venv/bin/python benchmarks/modal_engine.py --only default --cases 10   # 200 cells
    .venv/bin/python benchmarks/modal_engine.py --only default-500 --write  # into RESULTS.md

Every scenario shares one server (the SDK's client is a per-process singleton): its counters are
reset before each, and the sandboxes counted are those of the scenario's own app.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# benchmarks/modal.py is named like the SDK: keep this folder off the path so `import modal` finds
# the SDK, and put the repository root on it for tests/fakes.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

from benchmarks.bench_figures import commit  # noqa: E402
from benchmarks.results_file import write_section  # noqa: E402
from benchmarks.trivial_matter import AGENT_TOML as TRIVIAL_AGENT  # noqa: E402
from benchmarks.trivial_matter import write_agent, write_catalog  # noqa: E402
from bot.composition import open_store  # noqa: E402 - after the path fix above
from tests.fakes.modal_server.fixture import (  # noqa: E402
    ModalTestServer,
    host_problem,
    running_modal_server,
)
from workflows.catalog.models import ArmSpec  # noqa: E402
from workflows.engine.embedded import engine_session  # noqa: E402
from workflows.engine.engine_client import start_experiment, wait_for  # noqa: E402
from workflows.engine.grading import CaseGrader  # noqa: E402
from workflows.engine.planning import plan_experiment  # noqa: E402
from workflows.providers.modal import ModalProvider  # noqa: E402
from workflows.records import RunStatus  # noqa: E402
from workflows.settings import Settings  # noqa: E402

SERVER_RATE = 5.0
SERVER_MAX_STARTING = 128
START_LATENCY_S = 2.7

AGENT_TOML = (
    TRIVIAL_AGENT
    + """[sandbox]
cpu = 1
memory_mb = 512
"""
)


@dataclass(frozen=True)
class Scenario:
    name: str
    cases: int
    note: str
    settings: dict[str, Any] = field(default_factory=dict)  # Settings.with_changes(**settings)
    arms: int = 4
    trials: int = 5

    @property
    def cells(self) -> int:
        return self.cases * self.arms * self.trials


SCENARIOS = [
    Scenario("default", 100, "defaults: provision queue 5/s, client 5/s, 100 starting"),
    Scenario("default-500", 25, "the defaults at the scale of the rows below"),
    Scenario(
        "default-2000-in-flight-64",
        100,
        "2,000 cells, 64 runs in flight: enough to keep 5 creations/s busy, without polling "
        "500 sandboxes on a 2-core host",
        {"sandbox": {"experiment_parallelism": 64}},
    ),
    Scenario(
        "queue-4/s",
        25,
        "provision queue 4/s (under the server's 5/s)",
        {"sandbox": {"provision_rate_per_s": 4.0}},
    ),
    Scenario(
        "queue-only", 25, "provision queue 5/s, no client bucket", {"modal": {"creates_per_s": 0.0}}
    ),
]


def rpc_difference(after: dict[str, int], before: dict[str, int]) -> collections.Counter[str]:
    return collections.Counter({name: n - before.get(name, 0) for name, n in after.items()})


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def memory_used_mb() -> int:
    """`used` of `free -m` (the containers' agents and the server included)."""
    out = subprocess.run(["free", "-m"], capture_output=True, text=True, check=True).stdout
    return int(out.splitlines()[1].split()[2])


async def run_scenario(scenario: Scenario, root: Path, server: ModalTestServer) -> dict[str, Any]:
    write_catalog(root / "catalog", scenario.cases)
    commits = write_agent(root / "agent", scenario.arms, AGENT_TOML)
    app_name = f"evalbot-bench-{scenario.name.replace('/', '-')}-{uuid.uuid4().hex[:6]}"
    settings = Settings(
        data_dir=root / "state",
        catalog_root=root / "catalog",
        sandbox={"provider": "modal"},
        modal={"app_name": app_name},
    ).with_changes(**scenario.settings)
    server.reset_counters()
    provider = ModalProvider.from_settings(settings)  # the real `modal` SDK
    store = open_store(settings)
    arm_specs = [ArmSpec(name=f"arm{i}", ref=c, commit=c) for i, c in enumerate(commits)]
    spec = plan_experiment(
        settings, repo=str(root / "agent"), dataset="bench", arms=arm_specs, trials=scenario.trials
    )
    load_before, memory_before = load(), memory_used_mb()
    rpcs_before = server.rpc_counts()
    memory_peak = memory_before
    async with engine_session(settings, provider, store, CaseGrader()) as session:
        started = time.monotonic()
        await start_experiment(session.client, settings, spec)
        waiting = asyncio.ensure_future(wait_for(session.client, spec.experiment_id))
        next_report = started + PROGRESS_EVERY_S
        while not waiting.done():
            await asyncio.wait({waiting}, timeout=2)
            memory_peak = max(memory_peak, memory_used_mb())
            if time.monotonic() >= next_report:
                next_report += PROGRESS_EVERY_S
                print(
                    progress_line(scenario, store, spec.experiment_id, server, started), flush=True
                )
        progress = waiting.result()
        makespan = time.monotonic() - started
    load_after = load()
    await asyncio.sleep(1.5)  # the server writes its RPC counts each second
    rpcs = rpc_difference(server.rpc_counts(), rpcs_before)

    runs = store.list_runs(spec.experiment_id)
    expected = {cell.run_id for cell in spec.cells()}
    stored = collections.Counter(run.run_id for run in runs)
    app_id = (await provider.app()).app_id
    metas = [m for m in server.cloud.sandbox_metas() if m.get("app_id") == app_id]
    per_cell = collections.Counter(
        m["tags"]["run"] for m in metas if m["tags"].get("evalbot") == "run"
    )
    statuses = collections.Counter(str(run.status) for run in runs)
    provision = [run.provision_s for run in runs if run.provision_s is not None]
    stats = server.stats()
    scored = statuses.get(str(RunStatus.SCORED), 0)
    created_at = sorted(m["created_at"] for m in metas)
    creation_span = created_at[-1] - created_at[0] if len(created_at) > 1 else 0.0
    # The retry budget: each creation may be refused `max_attempts - 1` times before its attempt
    # gives up (and the stage retries the provision); within it, no attempt gave up.
    per_creation = provider.config.admission.max_attempts - 1
    return {
        "scenario": scenario.name,
        "commit": commit(),
        "note": scenario.note,
        "settings": scenario.settings,
        "cells": scenario.cells,
        "shape": f"{scenario.cases} cases x {scenario.arms} arms x {scenario.trials} trials",
        "makespan_s": round(makespan, 1),
        "rpcs_per_cell": round(sum(rpcs.values()) / scenario.cells, 1),
        "rpcs_top": dict(rpcs.most_common(8)),
        "cells_per_s": round(len(runs) / makespan, 2),
        "stored": len(runs),
        "statuses": dict(statuses),
        "every_cell_once": set(stored) == expected and max(stored.values(), default=0) == 1,
        "missing": len(expected - set(stored)),
        "sandboxes_per_cell_max": max(per_cell.values(), default=0),
        "cells_with_sandbox": len(per_cell),
        "image_builds": provider.images.builds,
        "left_running": sum(1 for m in metas if m["terminated_at"] is None),
        "server_alive_at_end": stats["alive"],
        "server_accepted": stats["created"],
        "server_max_per_1s": stats["max_per_1s"],
        "server_peak_starting": stats["peak_starting"],
        "server_refusals": stats["refused"],
        "client_retries": provider.admission.stats.rate_limited,
        "server_max_refused_one": stats.get("max_refused_one"),
        # every sandbox of the run as the server saw it, first creation to last
        "creations_per_s": round((len(created_at) - 1) / creation_span, 2) if creation_span else 0,
        "creation_span_s": round(creation_span, 1),
        "retry_budget": per_creation * len(metas),
        "within_retry_budget": provider.admission.stats.gave_up == 0
        and stats["refused"] <= per_creation * len(metas),
        # a provision attempt that gave up (8 refusals in a row) is retried by the stage's retry
        # policy; a cell is lost only when those retries are spent too (a sandbox_error)
        "attempts_gave_up": provider.admission.stats.gave_up,
        "sandbox_errors": statuses.get(str(RunStatus.SANDBOX_ERROR), 0),
        "client_peak_starting": provider.admission.stats.peak_starting,
        "provision_p50_s": round(percentile(provision, 50), 2),
        "provision_p95_s": round(percentile(provision, 95), 2),
        "progress_scored": progress.scored,
        "scored": scored,
        "load_before": load_before,
        "load_after": load_after,
        "memory_used_mb_before": memory_before,
        "memory_used_mb_peak": memory_peak,
    }


PROGRESS_EVERY_S = 60.0


def progress_line(
    scenario: Scenario, store: Any, experiment_id: str, server: ModalTestServer, started: float
) -> str:
    """One line while the experiment runs: stored results and the server's counters so far."""
    runs = store.list_runs(experiment_id)
    scored = sum(1 for run in runs if run.status == RunStatus.SCORED)
    stats = server.stats()
    return (
        f"# {time.strftime('%H:%M:%S')} {scenario.name}: {time.monotonic() - started:.0f} s, "
        f"{len(runs)}/{scenario.cells} stored, {scored} scored; server created "
        f"{stats['created']}, refused {stats['refused']}, alive {stats['alive']}; load {load()}"
    )


def summary(result: dict[str, Any]) -> str:
    """The figures issue 19 asks for, in one line."""
    return (
        f"cells {result['cells']} · scored {result['scored']} · makespan {result['makespan_s']} s"
        f" · creations/s {result['creations_per_s']} (server-side, {result['server_accepted']} "
        f"sandboxes over {result['creation_span_s']} s) · RESOURCE_EXHAUSTED "
        f"{result['server_refusals']} (server, at most {result['server_max_refused_one']} for one "
        f"creation) · retries {result['client_retries']} (client) · "
        f"retry budget {result['retry_budget']}, "
        f"{'within' if result['within_retry_budget'] else 'EXCEEDED'}"
        + (f" · {result['rpcs_per_cell']} RPCs per cell" if "rpcs_per_cell" in result else "")
    )


def row(result: dict[str, Any]) -> str:
    """A line of the table in benchmarks/RESULTS.md ("Modal through the engine")."""
    budget = result["retry_budget"]
    cells = [
        f"{result['scenario']} @ {result['commit']}" if "commit" in result else result["scenario"],
        f"{result['stored']} / {result['cells']}" + (" ✓" if result["every_cell_once"] else " ✗"),
        str(result["scored"]),
        f"{result['sandbox_errors']} ({result['attempts_gave_up']})",
        f"{result['makespan_s']} s",
        str(result["cells_per_s"]),
        str(result.get("rpcs_per_cell", "-")),
        str(result["creations_per_s"]),
        str(result["server_max_per_1s"]),
        f"{result['server_refusals']} (≤ {result['server_max_refused_one']} each)",
        str(result["client_retries"]),
        f"{budget} " + ("✓" if result["within_retry_budget"] else "✗"),
        str(result["server_alive_at_end"]),
        f"{result['provision_p50_s']} / {result['provision_p95_s']} s",
        result["load_before"].split()[0] + " → " + result["load_after"].split()[0],
        f"{result['memory_used_mb_before']} → {result['memory_used_mb_peak']} MB",
    ]
    return "| " + " | ".join(cells) + " |"


def write_from_log(logs: list[Path]) -> None:
    """Write the RESULTS.md section from what earlier runs printed (their header lines and their
    JSON results): a long run is not re-run to be written down."""
    header: list[str] = []
    results: list[dict[str, Any]] = []
    for log in logs:
        lines = log.read_text().splitlines()
        found = [json.loads(line) for line in lines if line.startswith('{"scenario"')]
        if not found:
            raise SystemExit(f"{log} holds no result line: did the run finish?")
        header += [line for line in lines if line.startswith("# ") and " UTC · " in line]
        results += found
    header += [line for line in lines if line.startswith("# Modal test server:")][:1]
    rows = [row(result) for result in results]
    summaries = [f"- {result['scenario']}: {summary(result)}" for result in results]
    text = "\n".join([DESCRIPTION, "", *header, "", TABLE_HEAD, TABLE_RULE, *rows, "", *summaries])
    write_section(SECTION, text)
    print(text)


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--only", help="run one scenario by name")
    parser.add_argument("--cases", type=int, help="override the scenario's case count")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument(
        "--write-from",
        type=Path,
        nargs="+",
        help="update RESULTS.md from the output of earlier runs",
    )
    args = parser.parse_args()
    if args.write_from:
        write_from_log(args.write_from)
        return
    # Provision attempts that give up are counted in the output; Temporal's warning with a
    # traceback for each would bury it.
    logging.getLogger("temporalio.activity").setLevel(logging.ERROR)
    problem = host_problem()
    if problem:
        raise SystemExit(f"the Modal test server cannot run here: {problem}")
    chosen = [s for s in SCENARIOS if args.only in (None, s.name)]
    if not chosen:
        raise SystemExit(
            f"no scenario {args.only!r}; known: {', '.join(s.name for s in SCENARIOS)}"
        )
    if args.cases:
        chosen = [Scenario(**{**s.__dict__, "cases": args.cases}) for s in chosen]
    header = [
        f"# {time.strftime('%Y-%m-%d %H:%M')} UTC · {platform.node()} {platform.machine()}, "
        f"{os.cpu_count()} cores · load {load()}",
        f"# Modal test server: {SERVER_RATE:g} creations/s, refuses beyond "
        f"{SERVER_MAX_STARTING} starting; start latency {START_LATENCY_S} s; engine on a "
        "Temporal dev server",
    ]
    print("\n".join(header), flush=True)
    rows, results = [], []
    with tempfile.TemporaryDirectory(
        prefix="evalbot-modal-engine-", ignore_cleanup_errors=True
    ) as scratch:
        knobs = {
            "start_latency_s": START_LATENCY_S,
            "create_rate_per_s": SERVER_RATE,
            "max_starting": SERVER_MAX_STARTING,
        }
        with running_modal_server(Path(scratch) / "cloud", **knobs) as server:
            os.environ.update(server.env)  # before the SDK's client is first made
            for scenario in chosen:
                result = await run_scenario(scenario, Path(scratch) / scenario.name, server)
                print(json.dumps(result), flush=True)
                print(summary(result), flush=True)
                results.append(result)
                rows.append(row(result))
                print(rows[-1], flush=True)
    if args.write:
        summaries = [f"- {r['scenario']}: {summary(r)}" for r in results]
        text = "\n".join(
            [DESCRIPTION, "", *header, "", TABLE_HEAD, TABLE_RULE, *rows, "", *summaries]
        )
        write_section(SECTION, text)


SECTION = "modal-engine"
DESCRIPTION = """\
`.venv/bin/python benchmarks/modal_engine.py [--only NAME] [--cases N]` — a whole experiment
through the real engine (Temporal dev server, SQLite store, the real workers) with
`EVALBOT_PROVIDER=modal` and every other setting at its default: the real `modal` SDK talking to
the Modal test server (tests/fakes/modal_server; each sandbox a bubblewrap container), which
enforces the creation rate and the starting quota itself and adds a start latency to every
sandbox. A trivial agent (one `echo`), 4 arms (one image build each), 5 trials. Makespan: start of
the experiment to its end, image builds included. stored ✓: every cell stored exactly once, with
exactly one sandbox. lost (gave up): `sandbox_error` cells, and provision attempts that gave up
after `EVALBOT_MODAL_CREATE_ATTEMPTS` refusals. creations/s: sandboxes the server created over
the span from its first to its last creation. RESOURCE_EXHAUSTED: refusals the server sent, and
the most any one creation got (counted by its `run` tag); retries: refusals the client retried;
retry budget: `create_attempts - 1` per sandbox created, ✓ when no attempt gave up and the
server's refusals stay within it."""
TABLE_HEAD = (
    "| scenario @ commit | stored | scored | lost (gave up) | makespan | cells/s | RPCs / cell | "
    "creations/s | "
    "server max / 1 s | RESOURCE_EXHAUSTED (server) | retries (client) | retry budget | "
    "alive at the end | provision p50 / p95 | load avg 1 min | memory used |"
)
TABLE_RULE = "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"


if __name__ == "__main__":
    asyncio.run(main())
