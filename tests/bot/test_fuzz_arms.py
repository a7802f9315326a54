"""The arm grammar both front ends share (workflows/engine/arm_grammar.py) under hostile input:
the `/eval … --arm` comment and `evalbot run --arm` / `--set`. Every input gives arms that satisfy
the grammar's invariants, or a one-line error: a GrammarError in the comment, and on the command
line a PlanError that `command_errors` turns into a CommandError (exit 2). Nothing else escapes."""

from __future__ import annotations

import shlex

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bot.commands.errors import CommandError, ExitCode, command_errors
from bot.commands.plan_flags import CLI_MAX_ARMS, parse_arm_flags
from bot.grammar import MAX_ARMS, GrammarError, StartEval, parse_command
from workflows.catalog.names import is_name
from workflows.engine.arm_grammar import SETTING_KEY, ArmRequest, PlanError

PIECES = [
    "main", "pr", "pr-mini", "HEAD", "BASE", "=", ",", "model", "gpt-4.1-mini", "top_k", "3",
    "Pr", "-x", " ", "\t", '"', "'", "\\", "é", "\x00", "\u2028", "--set", "--arm", "a" * 40,
]  # fmt: skip
piece = st.one_of(st.sampled_from(PIECES), st.text(max_size=6))
arm_text = st.lists(piece, max_size=8).map("".join)
# mostly well formed arms, so that duplicates, caps and merges are reached too
good_arm = st.tuples(
    st.sampled_from(["main", "pr", "pr-mini", "a", "b", "c", "d", "e", "f", "g"]),
    st.sampled_from(["HEAD", "BASE", "main"]),
    st.lists(st.sampled_from(["model=x", "top_k=2", "mode=", "k=a=b"]), max_size=3),
).map(lambda t: ",".join([f"{t[0]}={t[1]}", *t[2]]))
any_arm = st.one_of(good_arm, arm_text)
setting = st.one_of(st.sampled_from(["model=y", "top_k=5", "x=", "=v", "novalue"]), arm_text)


def check_arms(arms: list[ArmRequest] | tuple[ArmRequest, ...], max_arms: int) -> None:
    names = [a.name for a in arms]
    assert len(names) == len(set(names)) and len(names) <= max_arms
    for arm in arms:
        assert is_name(arm.name) and arm.ref and arm.ref == arm.ref.strip()
        assert all(SETTING_KEY.match(key) for key in arm.config)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(any_arm, max_size=MAX_ARMS + 2), st.lists(setting, max_size=3))
def test_a_comment_with_arms_parses_or_is_one_grammar_error(
    arms: list[str], sets: list[str]
) -> None:
    words = [*(f"--arm {shlex.quote(a)}" for a in arms), *(f"--set {shlex.quote(s)}" for s in sets)]
    try:
        command = parse_command("/eval bar " + " ".join(words), max_trials=5)
    except GrammarError as error:
        assert str(error) and "\n" not in str(error).strip()
        return
    assert isinstance(command, StartEval)
    check_arms(command.arms, MAX_ARMS)
    assert len(command.arms) == len(arms)
    for arm in command.arms:  # --set reaches every arm; the arm's own pairs win
        assert all(arm.config.get(key) is not None for key in command.settings)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.none() | arm_text,
    st.none() | arm_text,
    st.lists(any_arm, max_size=CLI_MAX_ARMS + 2).map(tuple),
    st.lists(setting, max_size=3).map(tuple),
)
@example(base="main", head="\r", arms=(), sets=())  # found by this test: --head was unchecked
def test_the_command_lines_arms_parse_or_fail_as_a_command_error(
    base: str | None, head: str | None, arms: tuple[str, ...], sets: tuple[str, ...]
) -> None:
    try:
        with command_errors:
            parsed = parse_arm_flags(base, head, arms, sets)
    except SystemExit as stop:  # what the user sees: one sentence on stderr, exit 2
        assert stop.code == ExitCode.BAD_INPUT
        return
    check_arms(parsed, CLI_MAX_ARMS)
    assert parsed


@given(st.lists(any_arm, min_size=1, max_size=4).map(tuple))
def test_planning_errors_map_to_a_bad_input_command_error(arms: tuple[str, ...]) -> None:
    try:
        parse_arm_flags(None, None, arms, ())
    except PlanError as error:
        failure = command_errors.failure(error)
        assert isinstance(failure, CommandError) and failure.exit_code == ExitCode.BAD_INPUT
        assert failure.format_message() == str(error).replace("\n", " / ")


def test_the_comment_and_the_command_line_read_an_arm_alike() -> None:
    text = "pr-mini=HEAD,model=gpt-4.1-mini,top_k=3"
    command = parse_command(f"/eval bar --arm main=BASE --arm {text} --set top_k=1", max_trials=5)
    assert isinstance(command, StartEval)
    cli = parse_arm_flags(None, None, ("main=BASE", text), ("top_k=1",))
    assert list(command.arms) == cli
