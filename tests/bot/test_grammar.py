from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.grammar import (
    MAX_ARMS,
    Approve,
    CancelEval,
    GrammarError,
    Help,
    RerunFailed,
    StartEval,
    Status,
    eval_line,
    parse_command,
)
from workflows.engine.arm_grammar import ArmRequest


def parse(text: str) -> object:
    return parse_command(text, max_trials=10)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/eval bar", StartEval("bar")),
        ("  /eval bar  \nthanks!", StartEval("bar")),
        ("/eval bar --trials 3", StartEval("bar", trials=3)),
        ("/eval bar --trials=3", StartEval("bar", trials=3)),
        ("/eval bar --cases a,tag:x", StartEval("bar", cases=("a", "tag:x"))),
        ("/eval bar --vs merge-base", StartEval("bar", vs="merge-base")),
        (
            "/eval bar --set model=gpt-5 mode=fast --trials 2",
            StartEval("bar", trials=2, settings={"model": "gpt-5", "mode": "fast"}),
        ),
        ("/eval bar --set a=1 --set b=x=y", StartEval("bar", settings={"a": "1", "b": "x=y"})),
        ('/eval bar --set prompt="two words"', StartEval("bar", settings={"prompt": "two words"})),
        (
            "/eval bar --arm main=main --arm pr=HEAD --arm pr-mini=HEAD,model=gpt-4.1-mini",
            StartEval(
                "bar",
                arms=(
                    ArmRequest("main", "main", {}),
                    ArmRequest("pr", "HEAD", {}),
                    ArmRequest("pr-mini", "HEAD", {"model": "gpt-4.1-mini"}),
                ),
            ),
        ),
        (  # --set reaches every arm wherever it stands; an arm's own pair wins
            "/eval bar --arm=a=BASE --set model=m mode=x --arm b=HEAD,model=n",
            StartEval(
                "bar",
                settings={"model": "m", "mode": "x"},
                arms=(
                    ArmRequest("a", "BASE", {"model": "m", "mode": "x"}),
                    ArmRequest("b", "HEAD", {"model": "n", "mode": "x"}),
                ),
            ),
        ),
        ("/eval cancel", CancelEval()),
        ("/eval cancel bar", CancelEval("bar")),
        ("/eval rerun --failed", RerunFailed()),
        ("/eval rerun --failed bar", RerunFailed("bar")),
        ("/eval rerun bar --failed", RerunFailed("bar")),
        ("/eval status", Status()),
        ("/eval approve", Approve()),
        ("/eval approve EC26C3E", Approve("ec26c3e")),
        ("/eval help", Help()),
    ],
)
def test_parses_the_grammar(text: str, expected: object) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize(
    "text", ["", "hello", "/evaluate bar", "please /eval bar", "> /eval bar", None]
)
def test_other_comments_are_not_commands(text: str | None) -> None:
    assert parse_command(text, max_trials=10) is None
    assert eval_line(text) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("/eval", "needs a dataset or a command"),
        ("/eval bar --trials 0", "from 1 to 10, got '0'"),
        ("/eval bar --trials 11", "from 1 to 10, got '11'"),
        ("/eval bar --trials three", "got 'three'"),
        ("/eval bar --trials", "--trials needs a value"),
        ("/eval bar --cases ,", "--cases takes case ids"),
        ("/eval bar --cases 'a b'", "got 'a b'"),
        ("/eval bar --vs develop", "'main' or 'merge-base', got 'develop'"),
        ("/eval bar --set", "--set needs at least one key=value"),
        ("/eval bar --set novalue", "setting 'novalue' is not key=value"),
        ("/eval bar --frobnicate 1", "unknown option '--frobnicate'"),
        ("/eval bar extra", "unexpected 'extra'"),
        ("/eval Bar!", "'Bar!' is not a dataset name"),
        ("/eval --trials 3", "expected a dataset name"),
        ("/eval status now", "'/eval status' takes no arguments"),
        ("/eval approve abc", "takes at most a commit SHA, got 'abc'"),
        ("/eval approve abcdef1 extra", "takes at most a commit SHA"),
        ("/eval rerun bar", "needs --failed"),
        ("/eval cancel a b", "at most a dataset name"),
        ('/eval bar --set x="unclosed', "could not read the command"),
        ("/eval bar --arm", "--arm needs a value"),
        ("/eval bar --arm pr", "arm 'pr' is not NAME=REF[,key=value...]"),
        ("/eval bar --arm Pr=HEAD", "arm 'Pr=HEAD' is not NAME=REF"),
        ("/eval bar --arm pr=", "arm 'pr=' is not NAME=REF"),
        ("/eval bar --arm pr=HEAD,oops", "setting 'oops' is not key=value"),
        ("/eval bar --arm a=HEAD --arm a=BASE", "arm 'a' is given twice"),
        (
            "/eval bar " + " ".join(f"--arm a{i}=HEAD" for i in range(MAX_ARMS + 1)),
            f"{MAX_ARMS + 1} arms are more than the limit of {MAX_ARMS}",
        ),
    ],
)
def test_bad_commands_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(GrammarError, match=None) as caught:
        parse(text)
    assert message in str(caught.value)


@given(st.text(max_size=80))
def test_any_text_parses_or_fails_with_a_grammar_error(tail: str) -> None:
    try:
        parse("/eval " + tail)
    except GrammarError as error:
        assert str(error)
