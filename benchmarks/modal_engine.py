"""Modal through the engine: a whole experiment (100 cases × 4 arms × 5 trials = 2,000 cells, a
trivial agent) on a real Temporal dev server with the real workers and EVALBOT_PROVIDER=modal,
against the fake Modal (tests/fakes/modal_fake.py: real local bubblewrap containers) with Modal's
published start latency (2.7 s p50), its default account limit of 5 sandbox creations per second
and the ~128-starting quota, both enforced by the fake "server" (it refuses with
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

    .venv/bin/python benchmarks/modal_engine.py                      # the sweep in RESULTS.md
    .venv/bin/python benchmarks/modal_engine.py --only default --cases 10   # 200 cells
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import logging
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# benchmarks/modal.py is named like the SDK: keep this folder off the path so `import modal` finds
# the SDK, and put the repository root on it for tests/fakes.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

from benchmarks.trivial_matter import AGENT_TOML as TRIVIAL_AGENT  # noqa: E402
from benchmarks.trivial_matter import write_agent, write_catalog  # noqa: E402
from bot.composition import open_store  # noqa: E402 - after the path fix above
from tests.fakes.modal_fake import FakeModal, host_problem  # noqa: E402
from workflows.catalog.models import ArmSpec  # noqa: E402
from workflows.engine.embedded import engine_session  # noqa: E402
from workflows.engine.engine_client import start_experiment, wait_for  # noqa: E402
from workflows.engine.grading import CaseGrader  # noqa: E402
from workflows.engine.planning import plan_experiment  # noqa: E402
from workflows.providers.modal import ModalConfig, ModalProvider  # noqa: E402
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
        "queue-4/s",
        25,
        "provision queue 4/s (under the server's 5/s)",
        {"sandbox": {"provision_rate_per_s": 4.0}},
    ),
    Scenario(
        "queue-only", 25, "provision queue 5/s, no client bucket", {"modal": {"creates_per_s": 0.0}}
    ),
]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


async def run_scenario(scenario: Scenario, root: Path) -> dict[str, Any]:
    write_catalog(root / "catalog", scenario.cases)
    commits = write_agent(root / "agent", scenario.arms, AGENT_TOML)
    settings = Settings(
        data_dir=root / "state", catalog_root=root / "catalog", sandbox={"provider": "modal"}
    ).with_changes(**scenario.settings)
    cloud = FakeModal(
        root / "cloud",
        start_latency_s=START_LATENCY_S,
        create_rate_per_s=SERVER_RATE,
        max_starting=SERVER_MAX_STARTING,
    )
    provider = ModalProvider(cloud, ModalConfig.from_settings(settings))
    store = open_store(settings)
    arm_specs = [ArmSpec(name=f"arm{i}", ref=c, commit=c) for i, c in enumerate(commits)]
    spec = plan_experiment(
        settings, repo=str(root / "agent"), dataset="bench", arms=arm_specs, trials=scenario.trials
    )
    load_before = load()
    async with engine_session(settings, provider, store, CaseGrader()) as session:
        started = time.monotonic()
        await start_experiment(session.client, settings, spec)
        progress = await wait_for(session.client, spec.experiment_id)
        makespan = time.monotonic() - started
    load_after = load()

    runs = store.list_runs(spec.experiment_id)
    expected = {cell.run_id for cell in spec.cells()}
    stored = collections.Counter(run.run_id for run in runs)
    metas = [json.loads(p.read_text()) for p in cloud.root.glob("sandboxes/*/meta.json")]
    per_cell = collections.Counter(
        m["tags"]["run"] for m in metas if m["tags"].get("evalbot") == "run"
    )
    statuses = collections.Counter(str(run.status) for run in runs)
    provision = [run.provision_s for run in runs if run.provision_s is not None]
    stats = cloud.stats
    scored = statuses.get(str(RunStatus.SCORED), 0)
    return {
        "scenario": scenario.name,
        "note": scenario.note,
        "settings": scenario.settings,
        "cells": scenario.cells,
        "shape": f"{scenario.cases} cases x {scenario.arms} arms x {scenario.trials} trials",
        "makespan_s": round(makespan, 1),
        "cells_per_s": round(len(runs) / makespan, 2),
        "stored": len(runs),
        "statuses": dict(statuses),
        "every_cell_once": set(stored) == expected and max(stored.values(), default=0) == 1,
        "missing": len(expected - set(stored)),
        "sandboxes_per_cell_max": max(per_cell.values(), default=0),
        "cells_with_sandbox": len(per_cell),
        "image_builds": provider.images.builds,
        "left_running": sum(1 for m in metas if m["terminated_at"] is None),
        "server_accepted": len(stats.accepted),
        "server_max_per_1s": stats.max_per_window(1.0),
        "server_peak_starting": stats.peak_starting,
        "server_refusals": len(stats.rejected),
        "client_retries": provider.admission.stats.rate_limited,
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
    }


def row(result: dict[str, Any]) -> str:
    """A line of the table in benchmarks/RESULTS.md ("Modal through the engine")."""
    cells = [
        result["scenario"],
        f"{result['stored']} / {result['cells']}" + (" ✓" if result["every_cell_once"] else " ✗"),
        f"{result['sandbox_errors']} ({result['attempts_gave_up']})",
        f"{result['makespan_s']} s",
        str(result["cells_per_s"]),
        str(result["server_max_per_1s"]),
        str(result["server_peak_starting"]),
        str(result["server_refusals"]),
        f"{result['provision_p50_s']} / {result['provision_p95_s']} s",
        result["load_before"].split()[0] + " → " + result["load_after"].split()[0],
    ]
    return "| " + " | ".join(cells) + " |"


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--only", help="run one scenario by name")
    parser.add_argument("--cases", type=int, help="override the scenario's case count")
    args = parser.parse_args()
    # Provision attempts that give up are counted in the output; Temporal's warning with a
    # traceback for each would bury it.
    logging.getLogger("temporalio.activity").setLevel(logging.ERROR)
    problem = host_problem()
    if problem:
        raise SystemExit(f"the fake Modal cannot run here: {problem}")
    chosen = [s for s in SCENARIOS if args.only in (None, s.name)]
    if not chosen:
        raise SystemExit(
            f"no scenario {args.only!r}; known: {', '.join(s.name for s in SCENARIOS)}"
        )
    if args.cases:
        chosen = [Scenario(**{**s.__dict__, "cases": args.cases}) for s in chosen]
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M')} · {platform.node()} {platform.machine()}, "
        f"{os.cpu_count()} cores · load {load()}",
        flush=True,
    )
    print(
        f"# fake server: {SERVER_RATE:g} creations/s, refuses beyond {SERVER_MAX_STARTING} "
        f"starting; start latency {START_LATENCY_S} s; engine on a Temporal dev server",
        flush=True,
    )
    for scenario in chosen:
        with tempfile.TemporaryDirectory(
            prefix="evalbot-modal-engine-", ignore_cleanup_errors=True
        ) as scratch:
            result = await run_scenario(scenario, Path(scratch))
        print(json.dumps(result), flush=True)
        print(row(result), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
