"""Planner: the engine's plan_experiment decides; its answer is reused only while the dataset's
files are unchanged."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.github.github_types import PullInfo
from bot.grammar import StartEval
from bot.pr_planning import LimitError, Planner
from tests.bot.payloads import BASE_SHA, HEAD_SHA, pull_json
from tests.conftest import FIXTURES
from workflows.catalog.catalog_errors import UnknownNameError
from workflows.settings import Settings

PULL = PullInfo.from_json(pull_json())


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    root = tmp_path / "catalog"
    shutil.copytree(FIXTURES / "catalog", root)
    return root


def test_spec_for_a_pull_request(catalog: Path) -> None:
    planner = Planner(Settings(catalog_root=catalog))
    spec = planner.plan(
        PULL, StartEval("tiny", trials=1, settings={"k": "v"}), BASE_SHA, requested_by="amy"
    )
    assert spec.experiment_id == f"gh/Codertocat/Hello-World/pr2/tiny/{HEAD_SHA[:12]}"
    assert [(a.name, a.commit, a.config) for a in spec.arms] == [
        ("base", BASE_SHA, {"k": "v"}),
        ("head", HEAD_SHA, {"k": "v"}),
    ]
    assert spec.repo == PULL.clone_url and spec.trigger == "github"
    assert spec.labels["requested_by"] == "amy" and len(spec.case_ids) == 5


def test_a_changed_dataset_is_seen_at_once(catalog: Path) -> None:
    planner = Planner(Settings(catalog_root=catalog))
    request = StartEval("tiny", cases=("tag:permissions",))
    assert planner.plan(PULL, request, BASE_SHA, requested_by="x").case_ids == ("sale-plans",)
    case = catalog / "datasets" / "tiny" / "cases" / "lease-rent" / "case.toml"
    case.write_text(
        case.read_text().replace('tags = ["extraction", "json"]', 'tags = ["permissions"]')
    )
    again = planner.plan(PULL, request, BASE_SHA, requested_by="x")
    assert again.case_ids == ("lease-rent", "sale-plans")
    shutil.rmtree(catalog / "datasets" / "tiny")
    with pytest.raises(UnknownNameError, match="unknown dataset 'tiny'"):
        planner.plan(PULL, request, BASE_SHA, requested_by="x")


def test_limits(catalog: Path) -> None:
    planner = Planner(Settings(catalog_root=catalog, github={"max_cases": 4, "max_trials": 1}))
    with pytest.raises(LimitError, match="selects 5 cases, more than the limit of 4"):
        planner.plan(PULL, StartEval("tiny", trials=1), BASE_SHA, requested_by="x")
    with pytest.raises(LimitError, match="default of 2 trials is over the limit of 1"):
        planner.plan(PULL, StartEval("tiny", cases=("lease-rent",)), BASE_SHA, requested_by="x")
