"""Verdicts that hold, through the real CLI, the real Temporal dev server and the local provider
(docs/statistics.md, "Outcome policy"): what the agent caused counts, what the infrastructure
caused is retried and then makes the comparison incomplete, and a host that cannot run the
provider stops before the first cell."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.commands.experiments import run_command
from tests.fakes.dying_sandboxes import NAME as DYING
from tests.fakes.dying_sandboxes import DyingSandboxes
from tests.support.cli import evalbot, evalbot_json
from tests.support.crashy_agent import BETTER, CASES, crashy_agent_repo, write_catalog
from workflows.providers import PROVIDERS
from workflows.providers.base import HostUnsupported
from workflows.settings import Settings
from workflows.store import Store


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    return write_catalog(tmp_path / "catalog")


def run_args(repo: Path, base: str, head: str) -> list[str]:
    return ["run", "--repo", str(repo), "--dataset", "twenty", "--base", base, "--head", head,
            "--trials", "1", "--json"]  # fmt: skip


def test_a_pr_that_crashes_on_most_cases_is_regressed(tmp_path: Path, catalog: Path) -> None:
    repo = crashy_agent_repo(tmp_path / "agent", failure="crash")
    data = tmp_path / "state"

    ran = evalbot(data, catalog, *run_args(repo.path, repo.base, repo.head))

    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)  # the whole of stdout is one JSON document
    comparison = report["comparisons"][0]
    overall, failure_rate = comparison["rows"][0], comparison["failure_rate"]
    crashed = CASES - BETTER
    assert (overall["base_mean"], overall["head_mean"]) == (0.5, pytest.approx(0.4))
    assert overall["n_cases"] == CASES  # the crashes are paired, not dropped
    assert overall["verdict"] != "improved"
    assert failure_rate["base_mean"] == 0.0
    assert failure_rate["head_mean"] == pytest.approx(crashed / CASES)
    assert failure_rate["verdict"] == "regressed"
    assert failure_rate["p_value"] == pytest.approx(2 * 0.5**crashed)  # exact: 12 discordant
    assert comparison["verdict"] == "regressed"
    failed = [e for e in report["errors"] if e["status"] == "agent_error"]
    assert len(failed) == crashed and not any(e["infra"] for e in failed)

    table = evalbot(data, catalog, "results", report["experiment_id"])
    assert table.returncode == 0, table.stderr
    assert "**Verdict: 🔴 regressed**" in table.stdout
    failure_line = next(line for line in table.stdout.splitlines() if "**failure rate**" in line)
    assert "0%" in failure_line and "60%" in failure_line and "🔴 regressed" in failure_line


def test_sandboxes_lost_on_the_head_arm_are_retried_then_incomplete(
    tmp_path: Path, catalog: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same 12 cells, lost to the infrastructure instead: never a verdict, let alone green."""
    repo = crashy_agent_repo(tmp_path / "agent", failure="crash")
    made: list[DyingSandboxes] = []

    def doomed(run_id: str) -> bool:
        _, case, arm, _ = run_id.split("/")
        return arm == "head" and int(case.removeprefix("c")) > BETTER

    def factory(settings: Settings) -> DyingSandboxes:
        made.append(DyingSandboxes(settings, doomed))
        return made[-1]

    monkeypatch.setitem(PROVIDERS, DYING, factory)
    settings = Settings(
        data_dir=tmp_path / "state", catalog_root=catalog, sandbox={"provider": DYING}
    )
    ran = CliRunner().invoke(
        run_command, run_args(repo.path, repo.base, repo.head)[1:], obj=settings
    )

    assert ran.exit_code == 0, ran.output
    report = json.loads(ran.stdout)
    comparison = report["comparisons"][0]
    lost = [e for e in report["errors"] if e["status"] == "sandbox_error"]
    assert len(lost) == CASES - BETTER and all(e["infra"] for e in lost)
    assert all("(after 2 sandboxes)" in e["error"] for e in lost)  # retried once each
    killed = [run_id for provider in made for run_id in provider.killed]
    assert sorted(set(killed)) == sorted(e["run_id"] for e in lost)
    assert len(killed) == 2 * len(lost)
    assert comparison["verdict"] == "incomplete"
    assert f"{len(lost)} cells lost to infrastructure" in comparison["verdict_reason"]
    assert comparison["infrastructure"]["head_lost"] == len(lost)
    assert comparison["failure_rate"] is None  # lost cells are not the agent's failures


def test_a_host_that_cannot_run_the_provider_stops_before_the_first_cell(
    tmp_path: Path, catalog: Path
) -> None:
    repo = crashy_agent_repo(tmp_path / "agent")
    data = tmp_path / "state"
    no_cgroups = tmp_path / "no-cgroups"
    no_cgroups.mkdir()

    ran = evalbot(
        data, catalog, *run_args(repo.path, repo.base, repo.head),
        env={"EVALBOT_CGROUP_ROOT": str(no_cgroups), "EVALBOT_SANDBOX_CGROUPS": "v1"},
    )  # fmt: skip

    assert ran.returncode == 1
    assert ran.stdout == ""
    assert "Traceback" not in ran.stderr
    (line,) = ran.stderr.strip().splitlines()
    assert line.startswith("evalbot: error: the local sandbox provider cannot run here:")
    assert "cgroup v1" in line and "EVALBOT_SANDBOX_CGROUPS=none" in line  # the cause, the fix
    store = Store.from_settings(Settings(data_dir=data))
    store.migrate()
    assert [store.list_runs(e.spec.experiment_id) for e in store.list_experiments()] in ([], [[]])


class RefusingBuilds(DyingSandboxes):
    """A worker whose host check passed but whose provider then refuses the host (a remote
    worker on another machine): the experiment must still stop before its first cell."""

    async def build_image(self, source_repo: Path, commit: str, setup: str) -> str:
        raise HostUnsupported("the local sandbox provider cannot run here: bwrap vanished")


def test_a_worker_whose_host_refuses_stops_the_experiment_before_any_cell(
    tmp_path: Path, catalog: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = crashy_agent_repo(tmp_path / "agent")

    def factory(settings: Settings) -> RefusingBuilds:
        return RefusingBuilds(settings, doomed=lambda run_id: False)

    monkeypatch.setitem(PROVIDERS, DYING, factory)
    settings = Settings(
        data_dir=tmp_path / "state", catalog_root=catalog, sandbox={"provider": DYING}
    )
    ran = CliRunner().invoke(
        run_command, run_args(repo.path, repo.base, repo.head)[1:], obj=settings
    )

    assert ran.exit_code == 1
    assert "bwrap vanished" in ran.stderr and "Traceback" not in ran.output
    store = Store.from_settings(settings)
    (record,) = store.list_experiments()
    assert record.status == "failed"
    assert store.list_runs(record.spec.experiment_id) == []


def test_a_head_commit_that_does_not_build_counts_and_the_comment_says_why(
    tmp_path: Path, catalog: Path
) -> None:
    setup = "echo compiling; echo 'error: no module named foo' >&2; exit 3"
    repo = crashy_agent_repo(tmp_path / "agent", head_setup=setup)
    data = tmp_path / "state"

    ran = evalbot(data, catalog, *run_args(repo.path, repo.base, repo.head))

    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    (failure,) = report["build_failures"]
    assert (failure["arm"], failure["cells"]) == ("head", CASES)
    assert "no module named foo" in failure["log_tail"]
    comparison = report["comparisons"][0]
    assert comparison["rows"][0]["head_mean"] == 0.0  # every cell counted, at 0
    assert comparison["rows"][0]["n_cases"] == CASES
    assert comparison["verdict"] == "regressed"
    table = evalbot(data, catalog, "results", report["experiment_id"])
    assert "**head: build failed**" in table.stdout
    assert "> error: no module named foo" in table.stdout


def test_rerun_failed_leaves_the_agents_failures_unless_asked_and_then_says_so(
    tmp_path: Path, catalog: Path
) -> None:
    repo = crashy_agent_repo(tmp_path / "agent", failure="crash")
    data = tmp_path / "state"
    first = evalbot_json(data, catalog, *run_args(repo.path, repo.base, repo.head))
    experiment = first["experiment_id"]
    store = Store.from_settings(Settings(data_dir=data))
    before = {r.run_id: r for r in store.list_runs(experiment)}

    plain = evalbot_json(data, catalog, "rerun", experiment, "--failed", "--json")
    assert {r.run_id: r for r in store.list_runs(experiment)} == before  # nothing was infra
    assert plain["reran_agent_failures"] == 0

    asked = evalbot(data, catalog, "rerun", experiment, "--failed", "--include-agent-failures")
    assert asked.returncode == 0, asked.stderr
    after = {r.run_id: r for r in store.list_runs(experiment)}
    replaced = {i for i in after if after[i] != before[i]}
    crashed = {i for i, r in before.items() if r.status == "agent_error"}
    assert replaced and replaced <= crashed  # the same crashes again, stored anew
    assert "**Agent failures rerun on request:** 12 cells" in asked.stdout
