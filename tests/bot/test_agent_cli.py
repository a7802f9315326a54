"""Drive the CLI the way a coding agent would, using only the commands and JSON fields that
docs/SKILL.md teaches: create a case, estimate, run, read --json, wait, compare, history.

The real CLI runs as a subprocess on embedded defaults (the Temporal dev server started by the
command itself), with a copy of the tiny fixture catalog so the new case does not touch the repo."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.support.agent_repo import TINY_CATALOG, tiny_agent_repo
from tests.support.cli import evalbot, evalbot_json

SKILL = Path(__file__).resolve().parents[2] / "docs" / "SKILL.md"


def skill_commands() -> set[str]:
    """The evalbot subcommands SKILL.md shows (in its code blocks and inline code)."""
    return set(re.findall(r"evalbot ([a-z]+(?: new)?)", SKILL.read_text()))


def test_skill_documents_every_command_this_test_uses() -> None:
    used = {"cases new", "estimate", "run", "results", "wait", "compare", "history", "rerun"}
    assert used <= skill_commands()
    text = SKILL.read_text()
    for field in ("experiment_id", "progress", "comparisons", "rows", "verdict", "ci_low",
                  "total_cost_usd", "compared", "over_budget"):  # fmt: skip
        assert re.search(rf"[`\".]{field}\b", text), field


@pytest.mark.timeout(600)
def test_an_agent_creates_a_case_runs_reads_json_and_compares(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog"
    shutil.copytree(TINY_CATALOG, catalog)
    repo = tiny_agent_repo(tmp_path / "agent")
    data = tmp_path / "state"

    # 2. add a case (SKILL.md §2)
    created = evalbot_json(
        data, catalog, "cases", "new", "tiny", "nda-parties",
        "--prompt", "Who are the parties to the NDA? Cite the document.",
        "--tag", "agent-made", "--expect", "nda.md", "--json",
    )  # fmt: skip
    assert created["case_id"] == "nda-parties" and "case.toml" in created["files"]
    again = evalbot(data, catalog, "cases", "new", "tiny", "nda-parties", "--prompt", "x",
                    "--expect", "y")  # fmt: skip
    assert again.returncode == 2 and "exists already" in again.stderr

    # 3. estimate: no history yet, so the cost is unknown and nothing is over budget
    plan = ["--repo", str(repo.path), "--dataset", "tiny", "--base", repo.base, "--head", repo.head,
            "--trials", "1", "--cases", "supply-governing-law,tag:agent-made"]  # fmt: skip
    first_estimate = evalbot_json(data, catalog, "estimate", *plan, "--budget-usd", "5", "--json")
    assert first_estimate["known"] is False

    # 4. run and 5. read the result
    report = evalbot_json(data, catalog, "run", *plan, "--json")
    first = report["experiment_id"]
    assert report["progress"]["complete"] is True
    overall = next(r for r in report["comparisons"][0]["rows"] if r["overall"])
    assert overall["n_cases"] == 2 and overall["delta"] is not None

    waited = evalbot_json(data, catalog, "wait", first, "--json", "--timeout", "5")
    assert waited["status"] == "completed"

    # 3. again: now there is history to estimate from
    estimate = evalbot_json(data, catalog, "estimate", *plan, "--json")
    assert estimate["known"] is True and estimate["cells"] == 4
    tiny_budget = evalbot(data, catalog, "estimate", *plan, "--budget-usd", "0", "--json")
    if estimate["cost_usd"] > 0:
        assert tiny_budget.returncode == 4 and json.loads(tiny_budget.stdout)["over_budget"]

    # a second experiment: only the head arm, the same cases
    second = evalbot_json(
        data, catalog, "run", "--repo", str(repo.path), "--dataset", "tiny",
        "--arm", f"head={repo.head}", "--trials", "1",
        "--cases", "supply-governing-law,tag:agent-made", "--json",
    )["experiment_id"]  # fmt: skip

    # 6. compare the first experiment's base arm with the second's head
    comparison = evalbot_json(data, catalog, "compare", f"{first}:base", second, "--json")
    assert comparison["compared"] == {"a": f"{first}:base", "b": second}
    assert [a["commit"] for a in comparison["arms"]] == [repo.base, repo.head]
    row = next(r for r in comparison["comparisons"][0]["rows"] if r["overall"])
    # the same head on the same cases: compare must agree with the first experiment's own table
    assert row["n_cases"] == 2
    assert row["base_mean"] == pytest.approx(overall["base_mean"])
    assert row["head_mean"] == pytest.approx(overall["head_mean"])

    unknown_arm = evalbot(data, catalog, "compare", f"{first}:nope", second, "--json")
    assert unknown_arm.returncode == 2 and "no arm 'nope'" in unknown_arm.stderr

    # history: CLI runs are not main evaluations
    history = evalbot_json(data, catalog, "history", "--dataset", "tiny", "--json")
    assert history == {"dataset": "tiny", "points": []}
