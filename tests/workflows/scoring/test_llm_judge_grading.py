"""The LLM judge through `grade_case`: the judge record and the rubric hash on the scores, kept by
the store, and a judge outage that is never a zero."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import SecretStr

from tests.conftest import FIXTURES
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.workflows.store.builders import make_result, make_spec
from workflows.catalog.models import Case, Criterion, GraderKind, Rubric
from workflows.records import RunStatus
from workflows.scoring import JudgeUnavailable, RubricError, grade_case, validate_rubric
from workflows.scoring.llm_judge import JudgeConfig, LlmJudge
from workflows.scoring.rubric_hash import criterion_hash, rubric_hashes
from workflows.settings import Settings
from workflows.store import Store

from .support import RunDir


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI().start()
    yield fake
    fake.stop()


@pytest.fixture
def judge(server: FakeOpenAI, tmp_path: Path) -> Iterator[LlmJudge]:
    config = JudgeConfig(
        base_url=server.base_url,
        model="m",
        api_key=SecretStr("k-123"),
        rate_per_s=0,
        backoff_base_s=0.01,
        cache_dir=tmp_path / "cache",
        output_usd_per_mtok=10.0,
    )
    with_client = LlmJudge(config)
    yield with_client
    with_client.close()


def llm_case(samples: int = 1, reference: str | None = "Both contracts.") -> Case:
    criteria = (
        Criterion(name="names", grader=GraderKind.CONTAINS_ALL, params={"values": ["Supply"]}),
        Criterion(
            name="judged",
            grader=GraderKind.LLM,
            weight=2.0,
            params={"prompt": "Is it right?", "reference": True, "judge_samples": samples},
        ),
    )
    rubric = Rubric(criteria=criteria)
    return Case(id="case-1", prompt="Task.", world="w", rubric=rubric, reference=reference)


def test_judged_scores_carry_the_judge_record_and_rubric_hashes(
    run: RunDir, judge: LlmJudge, server: FakeOpenAI
) -> None:
    run.out("answer.md", "Supply Agreement. PASS")
    collected = run.load()
    names, judged = grade_case(llm_case(samples=2), collected.outputs, collected.world, judge)
    assert (names.score, names.judge) == (1.0, None)
    assert judged.score == 1.0 and judged.judge is not None
    assert (judged.judge.samples, judged.judge.calls, judged.judge.agreement) == (2, 2, 1.0)
    assert judged.judge.cost_usd == pytest.approx(2 * 30 * 10.0 / 1e6)
    assert judged.rationale.startswith("2/2 samples agree")
    case = llm_case(samples=2)
    assert names.rubric_hash == criterion_hash(case, case.rubric.criteria[0])
    assert judged.rubric_hash == rubric_hashes([case])[("case-1", "judged")]
    assert server.calls == 2


def test_judge_outage_propagates_so_the_run_is_a_judge_error(
    run: RunDir, judge: LlmJudge, server: FakeOpenAI
) -> None:
    server.enqueue(Reply(status=401))
    collected = run.load()
    with pytest.raises(JudgeUnavailable):
        grade_case(llm_case(), collected.outputs, collected.world, judge)


def test_judge_samples_is_a_checked_param() -> None:
    assert validate_rubric(llm_case(samples=3)) == []
    problems = validate_rubric(llm_case(samples=0))
    assert problems and "judge_samples" in problems[0]


def test_rubric_hash_changes_with_the_ruler_only() -> None:
    case = llm_case()
    (names, judged) = case.rubric.criteria
    base = criterion_hash(case, judged)
    assert criterion_hash(case, judged) == base
    assert criterion_hash(case.model_copy(update={"prompt": "Other task."}), judged) == base
    assert criterion_hash(case.model_copy(update={"reference": "New ref."}), judged) != base
    reworded = judged.model_copy(update={"params": {**judged.params, "prompt": "Is it right?!"}})
    assert criterion_hash(case, reworded) != base
    assert criterion_hash(case, judged.model_copy(update={"weight": 1.0})) != base
    unaffected = criterion_hash(case.model_copy(update={"reference": "New."}), names)
    assert unaffected == criterion_hash(case, names)


def test_the_store_keeps_judge_records_and_rubric_hashes(
    run: RunDir, judge: LlmJudge, tmp_path: Path
) -> None:
    run.out("answer.md", "Supply. PASS")
    collected = run.load()
    criteria = tuple(grade_case(llm_case(samples=3), collected.outputs, collected.world, judge))
    result = make_result(status=RunStatus.SCORED, criteria=criteria)
    with Store(f"sqlite:///{tmp_path / 'evalbot.db'}") as store:
        store.migrate()
        store.save_experiment(make_spec())
        assert store.save_run(result)
        assert not store.save_run(result)  # identical content: nothing written
        loaded = store.get_run(result.run_id)
    assert loaded is not None
    assert loaded.criteria == criteria
    assert loaded.criteria[1].judge is not None and loaded.criteria[1].judge.samples == 3


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (JudgeUnavailable("HTTP 503"), "judge unavailable: HTTP 503"),
        (RubricError("sale-plans", "tone", "bad params"), "rubric error: case 'sale-plans'"),
        (RuntimeError("boom"), "grading failed: boom"),
    ],
)
async def test_the_score_stage_tells_judge_errors_from_rubric_errors(
    tmp_path: Path, error: Exception, reason: str
) -> None:
    from workflows.engine.activities import RunActivities

    def grader(*args: object) -> list[object]:
        raise error

    settings = Settings(data_dir=tmp_path, catalog_root=FIXTURES / "catalog")
    stage = RunActivities(settings, provider=None, store=None, grader=grader)  # type: ignore[arg-type]
    job = SimpleNamespace(
        run=SimpleNamespace(dataset="tiny", cell=SimpleNamespace(case_id="sale-plans")),
        collect=SimpleNamespace(outputs_ref="exp/sale-plans/arm/0"),
    )
    criteria, status, message = await stage._grade(job)  # type: ignore[arg-type]
    assert (criteria, status) == ((), RunStatus.JUDGE_ERROR)
    assert message.startswith(reason)
