"""The `/eval` parser under hostile input: hypothesis builds command lines from the grammar's own
pieces and from the characters that trip parsers up (quotes, backslashes, non-ASCII digits, huge
numbers, control characters). Every input parses or fails with a GrammarError (never another
exception: that would be a 5xx for the webhook), what parses satisfies the grammar's invariants,
and the time to parse adversarial lines is bounded."""

from __future__ import annotations

import contextlib
import shlex
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.grammar import (
    MAX_ARMS,
    NAME,
    SELECTOR,
    SETTING_KEY,
    SHA,
    Approve,
    Command,
    GrammarError,
    StartEval,
    parse_command,
)
from tests.chaos.record import record

MAX_TRIALS = 10
GITHUB_COMMENT_LIMIT = 65_536  # characters GitHub allows in one comment
TRICKY = [
    '"', "'", "\\", "\t", " ", "=", ",", "--", "-", ":", "\x00", "\r", "\u2028", "\u00a0",
    "²", "٣", "𝟗", "Ⅻ", "0", "1", "9" * 5000, "-1", "1e3", "0x10", "tag:", "é", "\U0001f600",
]  # fmt: skip
WORDS = [
    "bar", "tiny", "cancel", "rerun", "status", "approve", "help", "--trials", "--cases",
    "--set", "--vs", "--failed", "main", "merge-base", "3", "k=v", "a.b-c_d=x y", "tag:x",
    "deadbeef", "a" * 40, "--trials=2", "--cases=a,b", "--vs=main", "--set=k=v",
    "--arm", "pr=HEAD", "--arm=b=BASE,model=x", "a=HEAD,k=v",
]  # fmt: skip
token = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from(TRICKY),
    st.lists(st.sampled_from([*TRICKY, *"abc09-_.=,:"]), max_size=6).map("".join),
    st.text(max_size=8),
)
numberish = st.one_of(
    st.text(st.characters(categories=("Nd", "No", "Nl")), min_size=1, max_size=4),  # ², ٣, Ⅻ
    st.integers().map(str),
    st.integers(4000, 6000).map(lambda n: "9" * n),  # past int()'s digit limit
)
value = st.one_of(token, numberish)
option = st.tuples(
    st.sampled_from(["--trials", "--cases", "--set", "--vs", "--arm"]),
    st.sampled_from([" ", "="]),
    value,
).map("".join)
valid_option = st.sampled_from(
    ["--trials 2", "--cases a,tag:b", "--set k=v", "--vs main", "--arm pr=HEAD"]
)
anything = st.tuples(
    st.sampled_from(["bar", "cancel", "rerun", "approve", "status", "help", ""]),
    st.lists(st.one_of(token, option), max_size=10),
).map(lambda parts: " ".join(["/eval", parts[0], *parts[1]]))
one_bad_option = st.tuples(st.lists(valid_option, max_size=3), option).map(
    lambda parts: " ".join(["/eval bar", *parts[0], parts[1]])
)
line = st.one_of(anything, one_bad_option)


def parse(text: str) -> Command | None:
    return parse_command(text, max_trials=MAX_TRIALS)


def check_invariants(command: Command | None) -> None:
    if isinstance(command, StartEval):
        assert NAME.match(command.dataset)
        assert command.trials is None or 1 <= command.trials <= MAX_TRIALS
        assert all(SELECTOR.match(case) for case in command.cases)
        assert all(SETTING_KEY.match(key) for key in command.settings)
        assert command.vs in ("main", "merge-base")
        assert len({a.name for a in command.arms}) == len(command.arms) <= MAX_ARMS
        assert all(NAME.match(a.name) and a.ref for a in command.arms)
    if isinstance(command, Approve) and command.sha is not None:
        assert SHA.match(command.sha) and command.sha == command.sha.lower()


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line)
def test_any_command_line_parses_or_is_a_grammar_error(text: str) -> None:
    try:
        command = parse(text)
    except GrammarError as error:
        assert str(error) and "\n" not in str(error).strip()
        return
    check_invariants(command)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300), st.text(max_size=300))
def test_any_comment_body_parses_or_is_a_grammar_error(before: str, after: str) -> None:
    for body in (before, f"/eval {before}\n{after}", f"{before}\n/eval {after}"):
        with contextlib.suppress(GrammarError):
            check_invariants(parse(body))


@settings(max_examples=200, deadline=None)
@given(
    dataset=st.from_regex(r"\A[a-z][a-z0-9_-]{0,20}\Z").filter(
        lambda name: name not in ("cancel", "rerun", "status", "approve", "help")
    ),
    trials=st.none() | st.integers(1, MAX_TRIALS),
    cases=st.lists(st.from_regex(r"\A(tag:)?[a-z0-9][a-z0-9._-]{0,15}\Z"), max_size=5),
    pairs=st.dictionaries(
        st.from_regex(r"\A[A-Za-z0-9_][A-Za-z0-9_.-]{0,10}\Z"),
        st.text(
            st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp")), max_size=20
        ),
        max_size=4,
    ),
)
def test_well_formed_commands_round_trip(
    dataset: str, trials: int | None, cases: list[str], pairs: dict[str, str]
) -> None:
    text = f"/eval {dataset}"
    if trials is not None:
        text += f" --trials {trials}"
    if cases:
        text += " --cases " + ",".join(cases)
    for key, value in pairs.items():
        text += " --set " + shlex.quote(f"{key}={value}")
    parsed = parse(text)
    assert parsed == StartEval(dataset, trials, tuple(cases), dict(pairs))


ADVERSARIAL = {
    "one long word": lambda n: "/eval " + "a" * n,
    "unclosed quote": lambda n: '/eval "' + "x" * n,
    "backslashes": lambda n: "/eval " + "\\" * n,
    "many --set pairs": lambda n: "/eval bar " + "--set k=v " * (n // 10),
    "long --cases list": lambda n: "/eval bar --cases " + "a," * (n // 2),
    "huge --trials": lambda n: "/eval bar --trials " + "9" * n,
    "many quoted words": lambda n: "/eval " + '"a" ' * (n // 4),
    "long setting key": lambda n: "/eval bar --set " + "a" * n + "=b",
}


@pytest.mark.parametrize("size", [GITHUB_COMMENT_LIMIT, 5 * 1024 * 1024])
def test_parse_time_is_bounded_on_adversarial_lines(size: int) -> None:
    """GitHub caps a comment at 65,536 characters; the webhook body cap (5 MiB) bounds what a
    forged-but-signed delivery could carry. Either way a parse takes well under a second."""
    slowest, worst = 0.0, ""
    for name, make in ADVERSARIAL.items():
        text = make(size)
        started = time.perf_counter()
        with contextlib.suppress(GrammarError):
            parse(text)
        elapsed = time.perf_counter() - started
        if elapsed > slowest:
            slowest, worst = elapsed, name
    record(
        "hostile",
        f"/eval parser, adversarial lines of {size:,} characters",
        tried=len(ADVERSARIAL),
        contained=len(ADVERSARIAL) if slowest < 0.5 else 0,
        detail=f"slowest {slowest * 1000:.0f} ms ({worst})",
    )
    assert slowest < 0.5, f"{worst} took {slowest:.2f} s"


def test_a_long_but_honest_line_still_parses() -> None:
    """The line cap leaves room for --cases naming a couple of hundred cases."""
    cases = [f"case-{i:03d}-{'x' * 20}" for i in range(200)]
    parsed = parse("/eval bar --trials 3 --cases " + ",".join(cases))
    assert parsed == StartEval("bar", 3, tuple(cases))
