"""The planning flags `evalbot run` and `evalbot estimate` share (bot/commands/plan_flags.py)."""

from __future__ import annotations

import pytest

from bot.commands.budget import estimate_command
from bot.commands.experiments import run_command
from bot.commands.plan_flags import parse_arm_flags, split_multi
from workflows.engine.planning import PlanError

SHARED = ["repo", "dataset", "base", "head", "arms", "trials", "cases", "sets"]


def test_run_and_estimate_take_the_same_planning_flags_first() -> None:
    for command in (run_command, estimate_command):
        assert [p.name for p in command.params][: len(SHARED)] == SHARED


def test_base_and_head_come_first_and_every_arm_gets_the_common_settings() -> None:
    arms = parse_arm_flags("main", "pr", ("fast=pr,model=small",), ("model=big,temp=0", "seed=1"))
    assert arms == [
        ("base", "main", {"model": "big", "temp": "0", "seed": "1"}),
        ("head", "pr", {"model": "big", "temp": "0", "seed": "1"}),
        ("fast", "pr", {"model": "small", "temp": "0", "seed": "1"}),  # its own pair wins
    ]


def test_no_arm_at_all_says_what_to_compare() -> None:
    with pytest.raises(PlanError, match="say what to compare"):
        parse_arm_flags(None, None, (), ())


def test_split_multi_flattens_repeated_comma_separated_values() -> None:
    assert split_multi(("a,b", "", "c,,d")) == ["a", "b", "c", "d"]
