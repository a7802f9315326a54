"""Modal admission benchmark: N create → run → collect → terminate cycles of the `modal` provider
against the fake Modal (tests/fakes/modal_fake.py: real local containers), with Modal's published
start latency (2.7 s p50) and its default account limit of 5 sandbox creations per second enforced
by the fake "server" (it refuses with ResourceExhaustedError, as Modal does).

Driven at the provider level, not through Temporal: all N cycles are in flight at once (as an
experiment with experiment_parallelism >= N dispatches them) and go through the provider's admission
controller (token bucket + starting cap + retries with backoff) exactly as the provision activity
does; the Temporal part of admission (the provision queue's server-side rate limit) is not in this
measurement. Each cycle: `create` (admission, Sandbox.create, set-up: case files and the world
copied from its Volume), `start` (the runner, a trivial agent), poll the state file like the execute
activity (with `runner_alive` while running), read the answer, `usage`, `terminate`.

Reports, per configuration: makespan, cells/s, the most creations the server accepted in any
one-second window, peak sandboxes starting at once (server side), refusals retried by the client,
cells lost to refusals (SandboxRateLimited: infra errors), cycle time p50/p95. Usage:

    .venv/bin/python benchmarks/modal.py                       # the sweep recorded in RESULTS.md
    .venv/bin/python benchmarks/modal.py --only default --cells 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# This file is named like the SDK it exercises: keep its folder off the path so `import modal`
# finds the SDK, and put the repository root on it for tests/fakes.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

from tests.fakes.modal_fake import FakeModal, host_problem  # noqa: E402 - after the path fix above
from tests.workflows.providers.kits import make_agent_repo, make_world  # noqa: E402 - after the path fix above
from workflows.providers.base import ResourceLimits, SandboxError, SandboxSpec  # noqa: E402
from workflows.providers.modal import ModalConfig, ModalProvider, ModalSandbox  # noqa: E402
from workflows.providers.modal.modal_admission import AdmissionLimits  # noqa: E402

AGENT = 'echo "42 for $(cat "$EVALBOT_CASE_DIR/case.json")" > "$EVALBOT_OUT_DIR/answer.md"'
SERVER_RATE = 5.0
SERVER_MAX_STARTING = 128
START_LATENCY_S = 2.7


@dataclass(frozen=True)
class Scenario:
    name: str
    cells: int
    creates_per_s: float  # the client's token bucket (0 = none)
    max_starting: int  # the client's starting cap (0 = none)
    note: str
    max_attempts: int = 8


SCENARIOS = [
    Scenario("default", 2000, 5.0, 100, "defaults: client 5/s, 100 starting"),
    Scenario("client-4/s", 500, 4.0, 100, "client under the server limit"),
    Scenario("no-client-cap", 500, 0.0, 100, "no token bucket: the server refuses, we back off"),
    Scenario("starting-8", 500, 5.0, 8, "starting cap 8: Little's law caps throughput"),
]


@dataclass
class Outcome:
    cycle_s: list[float] = field(default_factory=list)
    ok: int = 0
    rate_limited: int = 0
    other_errors: list[str] = field(default_factory=list)


async def poll(sandbox: ModalSandbox) -> dict[str, Any]:
    """Like the execute activity: read the state with backoff, check the runner while it runs."""
    delay = 0.02
    while True:
        state = await sandbox.read_state()
        if state is not None and state.get("status") == "finished":
            return state
        if state is not None and not await sandbox.runner_alive():
            state = await sandbox.read_state()
            if state is None or state.get("status") != "finished":
                raise SandboxError("the runner died")
            return state
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


async def cycle(provider: ModalProvider, spec: SandboxSpec, outcome: Outcome) -> None:
    started = time.monotonic()
    try:
        sandbox = await provider.create(spec)
    except SandboxError as error:
        if type(error).__name__ == "SandboxRateLimited":
            outcome.rate_limited += 1
        else:
            outcome.other_errors.append(str(error)[:200])
        return
    try:
        await sandbox.start(AGENT)
        state = await poll(sandbox)
        answer = await sandbox.read_file("/out/answer.md")
        await sandbox.usage()
        if state.get("exit_code") == 0 and answer.startswith(b"42 for "):
            outcome.ok += 1
        else:
            outcome.other_errors.append(f"agent: {state}")
    except SandboxError as error:
        outcome.other_errors.append(str(error)[:200])
    finally:
        await sandbox.terminate()
        outcome.cycle_s.append(time.monotonic() - started)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def run_scenario(scenario: Scenario, base: Path, image_root: Path) -> dict[str, Any]:
    cloud = FakeModal(
        base / "cloud",
        start_latency_s=START_LATENCY_S,
        create_rate_per_s=SERVER_RATE,
        max_starting=SERVER_MAX_STARTING,
    )
    limits = AdmissionLimits(
        creates_per_s=scenario.creates_per_s,
        max_starting=scenario.max_starting,
        max_attempts=scenario.max_attempts,
    )
    provider = ModalProvider(
        cloud, ModalConfig(app_name="evalbot-bench", spool_dir=base / "spool", admission=limits)
    )
    image = await build_image(provider, image_root)
    cloud.stats = type(cloud.stats)()  # count the cells only, not the image build
    world = make_world(base / "world")
    outcome = Outcome()
    started = time.monotonic()
    await asyncio.gather(
        *(cycle(provider, spec(image, world, index), outcome) for index in range(scenario.cells))
    )
    makespan = time.monotonic() - started
    stats = cloud.stats
    return {
        "scenario": scenario.name,
        "note": scenario.note,
        "cells": scenario.cells,
        "ok": outcome.ok,
        "lost_to_refusals": outcome.rate_limited,
        "other_errors": len(outcome.other_errors),
        "error_samples": outcome.other_errors[:3],
        "makespan_s": round(makespan, 1),
        "cells_per_s": round(outcome.ok / makespan, 2),
        "server_max_per_1s": stats.max_per_window(1.0),
        "server_peak_starting": stats.peak_starting,
        "server_refusals": len(stats.rejected),
        "client_retries": provider.admission.stats.rate_limited,
        "client_peak_starting": provider.admission.stats.peak_starting,
        "ready_p50_s": round(percentile(stats.ready_delays, 50), 2),
        "cycle_p50_s": round(percentile(outcome.cycle_s, 50), 2),
        "cycle_p95_s": round(percentile(outcome.cycle_s, 95), 2),
    }


async def build_image(provider: ModalProvider, root: Path) -> str:
    repo = root / "agent-repo"
    if not repo.exists():
        make_agent_repo(repo)
    return await provider.build_image(repo, "main", "true")


def spec(image: str, world: Path, index: int) -> SandboxSpec:
    run_id = f"bench/case-{index // 10:03d}/arm/{index % 10}"
    case = json.dumps({"id": f"case-{index}", "prompt": "What is 6 x 7?"}).encode()
    return SandboxSpec(
        run_id=run_id,
        image=image,
        world_dir=world,
        case_files={"case.json": case},
        limits=ResourceLimits(cpu=1.0, memory_mb=1024, wall_timeout_s=60),
        labels={"experiment": "bench", "run": run_id},
    )


def row(result: dict[str, Any], scenario: Scenario) -> str:
    """A line of the table in benchmarks/RESULTS.md ("Modal admission")."""
    cells = [
        scenario.name,
        f"{scenario.creates_per_s:g}/s" if scenario.creates_per_s else "none",
        str(scenario.max_starting or "none"),
        f"{result['ok']} / {result['cells']}",
        str(result["lost_to_refusals"]),
        f"{result['makespan_s']} s",
        str(result["cells_per_s"]),
        str(result["server_max_per_1s"]),
        str(result["server_peak_starting"]),
        str(result["server_refusals"]),
    ]
    return "| " + " | ".join(cells) + " |"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="run one scenario by name")
    parser.add_argument("--cells", type=int, help="override the scenario's cell count")
    args = parser.parse_args()
    problem = host_problem()
    if problem:
        raise SystemExit(f"the fake Modal cannot run here: {problem}")
    chosen = [s for s in SCENARIOS if args.only in (None, s.name)]
    if args.cells:
        chosen = [Scenario(**{**s.__dict__, "cells": args.cells}) for s in chosen]
    print(f"# {time.strftime('%Y-%m-%d')} · {platform.machine()} · {platform.node()}", flush=True)
    print(
        f"# server: {SERVER_RATE:g} creations/s, refuses beyond {SERVER_MAX_STARTING} starting; "
        f"start latency {START_LATENCY_S} s",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="evalbot-modal-bench-") as scratch:
        for scenario in chosen:
            result = await run_scenario(scenario, Path(scratch) / scenario.name, Path(scratch))
            print(json.dumps(result), flush=True)
            print(row(result, scenario), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
