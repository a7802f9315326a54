"""Planner: the engine's plan_experiment decides; its answer is reused only while the dataset's
files are unchanged."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.arm_policy import ArmRefused
from bot.github.github_types import PullInfo
from bot.grammar import StartEval, parse_command
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
        PULL, StartEval("tiny", trials=1, settings={"model": "v"}), BASE_SHA, requested_by="amy"
    )
    assert spec.experiment_id == f"gh/Codertocat/Hello-World/pr2/tiny/{HEAD_SHA[:12]}"
    assert [(a.name, a.commit, a.config) for a in spec.arms] == [
        ("base", BASE_SHA, {"model": "v"}),
        ("head", HEAD_SHA, {"model": "v"}),
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


FORK = PullInfo.from_json(pull_json(fork=True))
OTHER_SHA = "a" * 40


def arms_request(*texts: str, sets: tuple[str, ...] = ()) -> StartEval:
    command = parse_command(
        "/eval tiny " + " ".join([*(f"--arm {t}" for t in texts), *(f"--set {s}" for s in sets)]),
        max_trials=5,
    )
    assert isinstance(command, StartEval)
    return command


def test_arms_from_a_comment_name_the_pull_requests_commits(catalog: Path) -> None:
    planner = Planner(Settings(catalog_root=catalog))
    request = arms_request(
        "main=master", "pr=HEAD", "pr-mini=HEAD,model=gpt-4.1-mini", "old=BASE", f"pin={OTHER_SHA}"
    )
    spec = planner.plan(PULL, request, BASE_SHA, requested_by="amy")
    assert [(a.name, a.ref, a.commit, a.config) for a in spec.arms] == [
        ("main", "master", BASE_SHA, {}),
        ("pr", "refs/pull/2/head", HEAD_SHA, {}),
        ("pr-mini", "refs/pull/2/head", HEAD_SHA, {"model": "gpt-4.1-mini"}),
        ("old", "master", BASE_SHA, {}),
        ("pin", OTHER_SHA, OTHER_SHA, {}),
    ]


def test_a_fork_may_run_only_its_approved_head_and_the_base(catalog: Path) -> None:
    planner = Planner(Settings(catalog_root=catalog))
    allowed = planner.plan(FORK, arms_request("a=BASE", "b=HEAD"), BASE_SHA, requested_by="x")
    assert [a.commit for a in allowed.arms] == [BASE_SHA, HEAD_SHA]
    for ref in (OTHER_SHA, "feature", "refs/pull/3/head"):
        with pytest.raises(ArmRefused, match=f"asks for '{ref}', but .* comes from a fork"):
            planner.plan(FORK, arms_request("a=BASE", f"b={ref}"), BASE_SHA, requested_by="x")


def test_a_ref_the_bot_cannot_resolve_says_which_refs_work(catalog: Path) -> None:
    planner = Planner(Settings(catalog_root=catalog))
    with pytest.raises(ArmRefused, match="asks for 'feature'; name HEAD, BASE \\(or 'master'\\)"):
        planner.plan(PULL, arms_request("a=BASE", "b=feature"), BASE_SHA, requested_by="x")


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (arms_request("a=BASE", "b=HEAD,colour=red"), "unknown config key 'colour'"),
        (StartEval("tiny", settings={"colour": "red"}), "unknown config key 'colour'"),
        (arms_request("a=BASE", "b=HEAD,api_key=x"), "config key 'api_key' is refused"),
        (arms_request("a=BASE", "b=HEAD", sets=("base_url=http://x",)), "'base_url' is refused"),
        (arms_request("a=BASE,GITHUB_TOKEN=x", "b=HEAD"), "'GITHUB_TOKEN' is refused"),
    ],
)
def test_config_keys_are_checked_for_every_arm(
    catalog: Path, request_: StartEval, message: str
) -> None:
    # the secret-like keys are refused even when an operator allowed them
    keys = "model,colourful,api_key,base_url,GITHUB_TOKEN"
    planner = Planner(Settings(catalog_root=catalog, github={"arm_config_keys": keys}))
    with pytest.raises(ArmRefused, match=message):
        planner.plan(PULL, request_, BASE_SHA, requested_by="x")
