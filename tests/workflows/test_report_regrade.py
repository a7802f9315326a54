"""Re-grading stored outputs: the pure function (workflows.engine.regrade_runs) and `evalbot
regrade` end to end — a real catalog on disk, a SQLite store, and the LLM judge over HTTP to the
fake OpenAI server — telling "the ruler changed" apart from "the agent changed"."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.commands.regrade import regrade_command
from tests.conftest import FIXTURES
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.experiments import make_spec, scored_run
from workflows.blobs import open_blob_store
from workflows.catalog.models import ArmSpec, ExperimentSpec
from workflows.engine.catalog_cache import CatalogCache
from workflows.engine.grading import CaseGrader
from workflows.engine.regrade_runs import (
    apply_updates,
    criterion_diffs,
    regrade_runs,
    verdict_changes,
)
from workflows.records import CriterionScore, RunResult, RunStatus, weighted_score
from workflows.scoring import JudgeUnavailable
from workflows.settings import Settings
from workflows.store import Store

# -- the pure function -------------------------------------------------------------------------


def crit(
    name: str, score: float | None, rationale: str = "", rubric_hash: str = ""
) -> CriterionScore:
    return CriterionScore(
        name=name,
        grader="regex",
        weight=1.0,
        score=score,
        rationale=rationale,
        rubric_hash=rubric_hash,
    )


def stored(
    run: RunResult, *criteria: CriterionScore, status: RunStatus = RunStatus.SCORED
) -> RunResult:
    return run.model_copy(
        update={
            "criteria": criteria,
            "score": weighted_score(criteria) if criteria else None,
            "status": status,
            "outputs_ref": run.run_id,
        }
    )


class ScriptedGrade:
    """New grades per run id; raises what it is told to; records what it was asked."""

    def __init__(self, grades: dict[str, list[CriterionScore] | Exception]) -> None:
        self.grades = grades
        self.asked: list[tuple[str, frozenset[str] | None]] = []

    def __call__(self, run: RunResult, only: frozenset[str] | None) -> list[CriterionScore]:
        self.asked.append((run.run_id, only))
        found = self.grades[run.run_id]
        if isinstance(found, Exception):
            raise found
        return [c for c in found if only is None or c.name in only]


def test_regrade_replaces_grades_keeps_unasked_criteria_and_lists_failures() -> None:
    spec = make_spec(n_cases=3, trials=1, arms=("main",))
    a, b, c = (scored_run(spec, i, "main", 0, {}) for i in range(3))
    runs = [
        stored(a, crit("x", 1.0, "ok", "h1"), crit("y", 0.0, "no", "h1")),
        stored(b, crit("x", 1.0, "ok", "h1"), crit("y", 1.0, "yes", "h1")),
        stored(c, status=RunStatus.JUDGE_ERROR),
    ]
    grade = ScriptedGrade(
        {
            a.run_id: [crit("x", 9.9), crit("y", 1.0, "now yes", "h2")],
            b.run_id: JudgeUnavailable("HTTP 503"),
            c.run_id: [crit("x", 0.0, "no", "h1"), crit("y", 1.0, "yes", "h2")],
        }
    )
    result = regrade_runs(runs, grade, criteria=["y"])
    assert grade.asked == [
        (a.run_id, frozenset({"y"})),
        (b.run_id, frozenset({"y"})),
        (c.run_id, None),
    ]
    (first, recovered) = result.updated
    assert [(k.name, k.score, k.rationale) for k in first.criteria] == [
        ("x", 1.0, "ok"),  # not asked for: the old grade stays
        ("y", 1.0, "now yes"),
    ]
    assert first.score == 1.0
    assert recovered.status is RunStatus.SCORED and recovered.score == 0.5
    assert result.recovered == [c.run_id]
    assert [(f.run_id, f.problem) for f in result.failures] == [
        (b.run_id, "JudgeUnavailable: HTTP 503")
    ]
    assert result.regraded == 2


def test_identical_grades_are_not_updates_and_other_errors_are_skipped() -> None:
    spec = make_spec(n_cases=2, trials=1, arms=("main",))
    a, b = (scored_run(spec, i, "main", 0, {}) for i in range(2))
    runs = [stored(a, crit("x", 1.0, "ok", "h")), stored(b, status=RunStatus.TIMEOUT)]
    result = regrade_runs(runs, ScriptedGrade({a.run_id: [crit("x", 1.0, "ok", "h")]}))
    assert result.updated == [] and result.regraded == 1
    assert result.skipped == {"timeout": 1}


def test_criterion_diffs_count_moves_by_hand() -> None:
    spec = make_spec(n_cases=4, trials=1, arms=("main",))
    runs = [scored_run(spec, i, "main", 0, {}) for i in range(4)]
    pairs = [
        (stored(runs[0], crit("x", 0.0, "a", "h1")), stored(runs[0], crit("x", 1.0, "b", "h2"))),
        (stored(runs[1], crit("x", 1.0, "a", "h1")), stored(runs[1], crit("x", 0.5, "a", "h2"))),
        (stored(runs[2], crit("x", 1.0, "a", "h1")), stored(runs[2], crit("x", 1.0, "a", "h1"))),
        (stored(runs[3], status=RunStatus.JUDGE_ERROR), stored(runs[3], crit("x", 0.0))),
    ]
    (diff,) = criterion_diffs(pairs)
    assert (diff.compared, diff.changed, diff.up, diff.down) == (3, 2, 1, 1)
    assert (diff.rationale_changed, diff.newly_scored, diff.rubric_changed) == (1, 1, 2)
    assert diff.mean_before == pytest.approx(2 / 3) and diff.mean_after == pytest.approx(2.5 / 3)
    assert diff.moved


def test_verdict_changes_show_when_the_ruler_moved_the_result() -> None:
    spec = make_spec(n_cases=12, trials=1)
    before = [
        stored(scored_run(spec, i, arm, 0, {}), crit("tone", 0.5, "", "h1"))
        for i in range(12)
        for arm in ("main", "pr")
    ]
    # a stricter judge: pr answers now all pass, main answers all fail
    regraded = [stored(r, crit("tone", 1.0 if r.arm == "pr" else 0.0, "", "h2")) for r in before]
    changes = verdict_changes(spec, before, apply_updates(before, regraded))
    assert {(v.criterion, v.before, v.after) for v in changes} == {
        ("overall", "no detectable change", "improved"),
        ("tone", "no detectable change", "improved"),
    }


# -- evalbot regrade, end to end ------------------------------------------------------------------

LLM_CRITERION = """
[[criteria]]
name = "tone"
grader = "llm"
description = "Professional tone"
params = { prompt = "Is the answer written in a professional tone?" }
"""


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(api_key="sk-regrade").start()
    yield fake
    fake.stop()


@pytest.fixture(params=["local", "s3"])
def env(request: pytest.FixtureRequest, tmp_path: Path, server: FakeOpenAI) -> Settings:
    """The regrade's settings; the runs' outputs in the local blob folder or an S3 bucket."""
    blobs = request.getfixturevalue("s3_bucket") if request.param == "s3" else {}
    catalog = tmp_path / "catalog"
    shutil.copytree(FIXTURES / "catalog", catalog)
    case = catalog / "datasets" / "tiny" / "cases" / "sale-plans" / "case.toml"
    case.write_text(case.read_text() + LLM_CRITERION)
    return Settings(
        data_dir=tmp_path / "data",
        catalog_root=catalog,
        judge={
            "base_url": server.base_url,
            "api_key": "sk-regrade",
            "rate_per_s": 0,
            "concurrency": 2,
        },
        **blobs,
    )


ANSWERS = {
    "main": "Northwind signed a Non-Disclosure agreement under New York law.",
    "pr": "Northwind signed a Non-Disclosure agreement. PASS",
}


def experiment(settings: Settings, store: Store) -> tuple[ExperimentSpec, list[RunResult]]:
    """Two arms × sale-plans × 2 trials, graded now and stored; one judge error, one timeout."""
    spec = ExperimentSpec(
        experiment_id="tiny-regrade",
        repo="/repo",
        dataset="tiny",
        case_ids=("sale-plans",),
        arms=(
            ArmSpec(name="main", ref="main", commit="a" * 40),
            ArmSpec(name="pr", ref="pr", commit="b" * 40),
        ),
        trials=2,
    )
    store.save_experiment(spec)
    catalog = CatalogCache(Path(settings.catalog_root))
    case = catalog.case("tiny", "sale-plans")
    world = catalog.world(case.world)
    runs = []
    blobs = open_blob_store(settings)
    for cell in spec.cells():
        outputs = blobs.staging(cell.run_id)
        (outputs / "out").mkdir(parents=True)
        # distinct per trial, so each judged answer is one judge call whatever the thread timing
        # (identical answers share a cache key and would race for it)
        (outputs / "out" / "answer.md").write_text(f"{ANSWERS[cell.arm]} (draft {cell.trial + 1})")
        run = RunResult(
            run_id=cell.run_id,
            experiment_id=spec.experiment_id,
            case_id=cell.case_id,
            arm=cell.arm,
            trial=cell.trial,
            seed=cell.seed,
            status=RunStatus.SCORED,
            outputs_ref=blobs.commit(cell.run_id, outputs),
        )
        if (cell.arm, cell.trial) == ("main", 1):
            run = run.model_copy(
                update={"status": RunStatus.JUDGE_ERROR, "error": "judge unavailable"}
            )
        elif (cell.arm, cell.trial) == ("pr", 1):
            run = run.model_copy(update={"status": RunStatus.TIMEOUT, "error": "slow"})
        else:
            with blobs.local_copy(run.outputs_ref) as folder:  # no judge yet: not judged
                criteria = tuple(CaseGrader(None)(case, folder, world))
            run = run.model_copy(update={"criteria": criteria, "score": weighted_score(criteria)})
        store.save_run(run)
        runs.append(run)
    return spec, runs


def invoke(settings: Settings, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(regrade_command, list(args), obj=settings)
    return result.exit_code, result.output


def test_regrade_scores_stored_outputs_with_the_new_ruler(
    env: Settings, server: FakeOpenAI
) -> None:
    with Store.from_settings(env) as store:
        store.migrate()
        _, before = experiment(env, store)
    # The ruler changes: accuracy now also wants "Pinecrest"; the judge is now configured.
    case = Path(env.catalog_root) / "datasets" / "tiny" / "cases" / "sale-plans" / "case.toml"
    case.write_text(case.read_text().replace('"New York"]', '"New York", "Pinecrest"]'))

    code, output = invoke(env, "tiny-regrade", "--json")
    assert code == 0, output
    result = json.loads(output)
    assert result["regraded"] == 3 and result["skipped"] == {"timeout": 1}
    assert result["recovered"] == ["tiny-regrade/sale-plans/main/1"]
    assert result["rubric_changed_since_scoring"] == ["accuracy"]
    diffs = {d["criterion"]: d for d in result["criteria"]}
    assert (diffs["accuracy"]["compared"], diffs["accuracy"]["down"]) == (2, 1)  # main lost it
    assert diffs["accuracy"]["rubric_changed"] == 2 and diffs["privilege"]["changed"] == 0
    assert diffs["tone"]["newly_scored"] == 2 + 1  # was "not judged"; + the judge error run
    assert server.calls == 3

    with Store.from_settings(env) as store:
        after = {r.run_id: r for r in store.list_runs("tiny-regrade")}
    main0 = after["tiny-regrade/sale-plans/main/0"]
    scores = {c.name: c for c in main0.criteria}
    assert [scores[n].score for n in ("privilege", "accuracy", "tone")] == [1.0, 0.0, 0.0]
    assert scores["tone"].judge is not None and scores["tone"].judge.calls == 1
    assert after["tiny-regrade/sale-plans/main/1"].status is RunStatus.SCORED
    assert after["tiny-regrade/sale-plans/pr/1"] == before[3]  # the timeout is untouched

    code, output = invoke(env, "tiny-regrade", "--json")  # again: same ruler, judge cached
    assert code == 0 and json.loads(output)["updated"] == [] and server.calls == 3


def test_regrade_text_output_dry_run_and_bad_input(env: Settings, server: FakeOpenAI) -> None:
    with Store.from_settings(env) as store:
        store.migrate()
        experiment(env, store)
    code, output = invoke(env, "tiny-regrade", "--criteria", "tone", "--dry-run")
    assert code == 0, output
    assert "3 runs graded again (1 judge errors now graded), 3 with new grades (dry run" in output
    assert "| tone | 0 | 0 | 0 | 0 | — → — | 3 | 0 |" in output
    assert "every difference above is the ruler" in output
    with Store.from_settings(env) as store:  # nothing saved
        assert store.get_run("tiny-regrade/sale-plans/main/1").status is RunStatus.JUDGE_ERROR
    code, output = invoke(env, "tiny-regrade", "--criteria", "nope")
    assert code == 2 and "unknown criterion 'nope'" in output and "known criteria:" in output
    code, output = invoke(env, "missing-id")
    assert code == 2 and "no experiment 'missing-id'" in output


def test_regrade_exits_1_when_the_judge_stays_down(env: Settings, server: FakeOpenAI) -> None:
    with Store.from_settings(env) as store:
        store.migrate()
        experiment(env, store)
    server.enqueue(*[Reply(status=401)] * 3)
    code, output = invoke(env, "tiny-regrade")
    assert code == 1
    assert "Could not regrade 3 runs (they keep their grades):" in output
    assert "sk-regrade" not in output
