"""Check the demo without the engine: run the sample agent at `main` and with the PR change over
every case of `bar`, grade with workflows.scoring, compare with workflows.stats.

    .venv/bin/python tools/demo_check.py                 # seed 0, 3 trials, the table
    .venv/bin/python tools/demo_check.py --seeds 0-19    # verdicts for 20 experiment seeds

Each run is a subprocess of Debian's python3 with the EVALBOT_*_DIR variables pointing at a fresh
copy of the world, as the `process` provider would do. The two arms get the same per-cell seeds
(workflows.catalog.models.cell_seed), as in a real experiment.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workflows.catalog.loaders import load_dataset, load_world  # noqa: E402
from workflows.catalog.models import Case, World, cell_seed  # noqa: E402
from workflows.records import weighted_score  # noqa: E402
from workflows.scoring import grade_case, load_run_outputs  # noqa: E402
from workflows.stats import PairedComparison, holm_verdicts, paired_comparison  # noqa: E402

AGENT = ROOT / "examples" / "legal-agent"
PR_OVERLAY = ROOT / "examples" / "legal-agent-pr"
PYTHON = shutil.which("python3", path="/usr/bin") or sys.executable


@dataclass(frozen=True)
class Cell:
    case: Case
    arm: str
    trial: int
    seed: int


def build_arms(dest: Path) -> dict[str, Path]:
    """`main`: the sample agent; `pr`: the same with the PR overlay copied over it."""
    arms = {}
    for name in ("main", "pr"):
        repo = dest / name
        shutil.copytree(AGENT, repo, ignore=shutil.ignore_patterns("__pycache__", ".venv"))
        if name == "pr":
            for path in PR_OVERLAY.rglob("*"):
                if path.is_file() and "__pycache__" not in path.parts:
                    target = repo / path.relative_to(PR_OVERLAY)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, target)
        arms[name] = repo
    return arms


def run_cell(cell: Cell, repo: Path, world: World, scratch: Path) -> dict:
    """Run one cell, collect its outputs in the layout of docs/graders.md, grade it."""
    base = Path(tempfile.mkdtemp(dir=scratch))
    world_copy, case_dir, outputs = base / "world", base / "case", base / "outputs"
    shutil.copytree(world.path, world_copy)
    case_dir.mkdir()
    (outputs / "out").mkdir(parents=True)
    case_json = {
        "id": cell.case.id,
        "prompt": cell.case.prompt,
        "attachments": list(cell.case.attachments),
        "world": world.name,
        "arm": {"name": cell.arm, "commit": "0" * 40, "config": {}},
        "trial": cell.trial,
        "seed": cell.seed,
    }
    (case_dir / "case.json").write_text(json.dumps(case_json), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(
        EVALBOT_CASE_DIR=str(case_dir),
        EVALBOT_WORLD_DIR=str(world_copy),
        EVALBOT_OUT_DIR=str(outputs / "out"),
        EVALBOT_REPO_DIR=str(repo),
        PYTHONDONTWRITEBYTECODE="1",
    )
    done = subprocess.run(
        [PYTHON, "-m", "legal_agent"], cwd=repo, env=env, capture_output=True, timeout=120
    )
    collect_world_changes(world.path, world_copy, outputs / "world_changes")
    collected = load_run_outputs(outputs, world.path)
    scores = grade_case(cell.case, collected.outputs, collected.world)
    usage = json.loads((outputs / "out" / "usage.json").read_text(encoding="utf-8"))
    shutil.rmtree(base)
    return {
        "case": cell.case.id,
        "arm": cell.arm,
        "trial": cell.trial,
        "exit_code": done.returncode,
        "stderr": done.stderr.decode(errors="replace")[-2000:],
        "criteria": {s.name: s.score for s in scores},
        "score": weighted_score(scores),
        "usage": usage,
    }


def collect_world_changes(original: Path, after: Path, changes: Path) -> None:
    for path in after.rglob("*"):
        if not path.is_file():
            continue
        relative = path.relative_to(after)
        before = original / relative
        if not before.is_file() or before.read_bytes() != path.read_bytes():
            target = changes / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


def cells(cases: list[Case], trials: int, experiment_seed: int) -> Iterator[Cell]:
    for case in cases:
        for arm in ("main", "pr"):
            for trial in range(trials):
                yield Cell(case, arm, trial, cell_seed(experiment_seed, case.id, trial))


def run_experiment(seed: int, trials: int = 3, workers: int = 2) -> list[dict]:
    dataset = load_dataset(ROOT, "bar")
    world = load_world(ROOT, "acme-acquisition")
    with tempfile.TemporaryDirectory(prefix="demo-check-") as tmp:
        arms = build_arms(Path(tmp))
        todo = list(cells(list(dataset.cases), trials, seed))
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(lambda c: run_cell(c, arms[c.arm], world, Path(tmp)), todo))


def compare(results: list[dict]) -> dict[str, tuple[PairedComparison, float | None, str]]:
    """Per criterion (and the overall score): the paired comparison and its Holm verdict."""
    names = [*sorted({n for r in results for n in r["criteria"]}), "score"]
    by_arm: dict[str, dict[str, dict[str, list[float | None]]]] = {}
    for r in results:
        values = dict(r["criteria"], score=r["score"])
        for name in names:
            if name in values:
                arm = by_arm.setdefault(name, {}).setdefault(r["arm"], {})
                arm.setdefault(r["case"], []).append(values[name])
    comparisons = {
        n: paired_comparison(by_arm[n].get("main", {}), by_arm[n].get("pr", {})) for n in names
    }
    criteria = {n: c for n, c in comparisons.items() if n != "score"}
    holm = holm_verdicts(criteria)
    holm["score"] = (comparisons["score"].p_value, comparisons["score"].verdict)
    return {n: (comparisons[n], holm[n][0], holm[n][1].value) for n in names}


def print_table(results: list[dict]) -> None:
    rows = compare(results)
    header = f"{'criterion':14} {'n':>3} {'main':>6} {'pr':>6} {'delta':>7}  {'95% CI':17}"
    print(f"{header} {'p_holm':>7}  verdict")
    for name, (c, p_holm, verdict) in rows.items():
        if c.delta is None or c.base_mean is None or c.head_mean is None:
            print(f"{name:14} {c.n:>3}  {verdict}")
            continue
        ci = f"[{c.ci_low:+.3f}, {c.ci_high:+.3f}]" if c.ci_low is not None else ""
        p = f"{p_holm:.4f}" if p_holm is not None else "-"
        print(
            f"{name:14} {c.n:>3} {c.base_mean:6.3f} {c.head_mean:6.3f} {c.delta:+7.3f}"
            f"  {ci:17} {p:>7}  {verdict}"
        )
    for arm in ("main", "pr"):
        mine = [r for r in results if r["arm"] == arm]
        cost = sum(r["usage"]["cost_usd"] for r in mine)
        tokens = sum(r["usage"]["input_tokens"] + r["usage"]["output_tokens"] for r in mine)
        failed = sum(1 for r in mine if r["exit_code"] != 0)
        print(f"{arm}: {len(mine)} runs, {failed} failed, {tokens} tokens, ${cost:.4f}")


def parse_seeds(text: str) -> list[int]:
    if "-" in text:
        low, high = text.split("-")
        return list(range(int(low), int(high) + 1))
    return [int(s) for s in text.split(",")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write every run's scores here")
    args = parser.parse_args()
    seeds = parse_seeds(args.seeds)
    for seed in seeds:
        results = run_experiment(seed, args.trials, args.workers)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
        if len(seeds) == 1:
            print_table(results)
        else:
            verdicts = {n: v for n, (_, _, v) in compare(results).items()}
            print(seed, json.dumps(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
