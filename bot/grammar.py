"""The `/eval` comment grammar.

    /eval <dataset> [--trials N] [--cases ID,ID|tag:T] [--set key=value ...] [--vs main|merge-base]
                    [--arm NAME=REF[,key=value...] ...]
    /eval cancel [<dataset>]
    /eval rerun --failed [<dataset>]
    /eval status
    /eval approve [<head sha>]
    /eval help

Only the first line of a comment is read, and only when it starts with `/eval`. Anything else on
that line that does not fit the grammar is a `GrammarError` whose message says what was wrong.

`--arm` and `--set` are parsed by the arm grammar `evalbot run` uses too
(workflows/engine/arm_grammar.py): one parser for both. Repeated `--arm`s replace the default arms
(`base`, `head`); the first is the baseline, `HEAD` and `BASE` name the PR's commits (resolved, and
checked against the trust rules, by bot/pr_planning.py). At most MAX_ARMS arms.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Literal

from workflows.catalog.models import NAME_PATTERN
from workflows.catalog.names import NAME_RULE, is_name, shown
from workflows.engine.arm_grammar import SETTING_KEY as SETTING_KEY
from workflows.engine.arm_grammar import ArmRequest, PlanError, arm_requests, parse_setting

PREFIX = "/eval"
USAGE = """\
Usage:
  /eval <dataset> [--trials N] [--cases ID,ID|tag:T] [--set key=value ...] [--vs main|merge-base]
                  [--arm NAME=REF[,key=value...] ...]  (REF: HEAD or BASE; first = baseline)
  /eval cancel [<dataset>]
  /eval rerun --failed [<dataset>]
  /eval status
  /eval approve [SHA]  (maintainers: allow this fork's head commit, SHA if given, to run)
  /eval help"""

NAME = re.compile(NAME_PATTERN)  # is_name() adds the length limit
SHA = re.compile(r"^[0-9a-fA-F]{7,40}$")
SELECTOR = re.compile(r"^(tag:)?[a-z0-9][a-z0-9._-]*$")  # and at most MAX_NAME_LENGTH long
VERBS = ("cancel", "rerun", "status", "approve", "help")
MAX_ARMS = 6  # arms one /eval may ask for (docs/github-bot.md): each multiplies the runs
MAX_LINE = 16_384  # characters; room for --cases listing a couple of hundred case ids
Baseline = Literal["main", "merge-base"]


class GrammarError(ValueError):
    """A `/eval` line that does not fit the grammar; `str()` is one sentence."""


@dataclass(frozen=True)
class StartEval:
    dataset: str
    trials: int | None = None
    cases: tuple[str, ...] = ()
    settings: dict[str, str] = field(default_factory=dict)
    vs: Baseline = "main"
    arms: tuple[ArmRequest, ...] = ()  # --arm, `settings` merged in; () = the default two arms


@dataclass(frozen=True)
class CancelEval:
    dataset: str | None = None


@dataclass(frozen=True)
class RerunFailed:
    dataset: str | None = None


@dataclass(frozen=True)
class Status:
    pass


@dataclass(frozen=True)
class Approve:
    sha: str | None = None  # the head the maintainer reviewed; refused if the head moved on


@dataclass(frozen=True)
class Help:
    pass


Command = StartEval | CancelEval | RerunFailed | Status | Approve | Help


def eval_line(body: str | None) -> str | None:
    """The comment's first line if it is an `/eval` command (`/evaluate` is not), else None."""
    first = (body or "").lstrip().split("\n", 1)[0].strip()
    if first == PREFIX or first.startswith(PREFIX + " ") or first.startswith(PREFIX + "\t"):
        return first
    return None


def parse_command(body: str | None, *, max_trials: int) -> Command | None:
    """Parse a comment body; None when it is not an `/eval` comment at all."""
    line = eval_line(body)
    if line is None:
        return None
    if len(line) > MAX_LINE:  # shlex is quadratic in a word's length: bound the work
        raise GrammarError(f"the /eval line is longer than {MAX_LINE} characters")
    words = _split(line)[1:]
    if not words:
        raise GrammarError("'/eval' needs a dataset or a command")
    verb, rest = words[0], words[1:]
    if verb == "help":
        return _no_args(Help(), verb, rest)
    if verb == "status":
        return _no_args(Status(), verb, rest)
    if verb == "approve":
        return _parse_approve(rest)
    if verb == "cancel":
        return CancelEval(_optional_dataset(verb, rest))
    if verb == "rerun":
        return _parse_rerun(rest)
    return _parse_start(verb, rest, max_trials)


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as error:  # unbalanced quotes
        raise GrammarError(f"could not read the command ({error})") from None


def _no_args(command: Command, verb: str, rest: list[str]) -> Command:
    if rest:
        raise GrammarError(f"'/eval {verb}' takes no arguments, got '{' '.join(rest)}'")
    return command


def _optional_dataset(verb: str, rest: list[str]) -> str | None:
    if not rest:
        return None
    if len(rest) > 1 or rest[0].startswith("-"):
        raise GrammarError(f"'/eval {verb}' takes at most a dataset name, got '{' '.join(rest)}'")
    return _dataset(rest[0])


def _parse_approve(rest: list[str]) -> Approve:
    if not rest:
        return Approve()
    if len(rest) > 1 or not SHA.match(rest[0]):
        raise GrammarError(f"'/eval approve' takes at most a commit SHA, got '{' '.join(rest)}'")
    return Approve(rest[0].lower())


def _parse_rerun(rest: list[str]) -> RerunFailed:
    if "--failed" not in rest:
        raise GrammarError("'/eval rerun' needs --failed (only failed cells can be rerun)")
    others = [w for w in rest if w != "--failed"]
    return RerunFailed(_optional_dataset("rerun --failed", others))


def _dataset(word: str) -> str:
    if word.startswith("-"):
        raise GrammarError(f"expected a dataset name before the options, got '{word}'")
    if not is_name(word) or word in VERBS:  # the catalog's rule (workflows/catalog/names.py)
        raise GrammarError(f"{shown(word)} is not a dataset name: names are {NAME_RULE}")
    return word


def _parse_start(word: str, rest: list[str], max_trials: int) -> StartEval:
    dataset = _dataset(word)
    options = _Options(max_trials)
    index = 0
    while index < len(rest):
        index = options.take(rest, index)
    try:
        arms = arm_requests(options.arms, options.settings, max_arms=MAX_ARMS)
    except PlanError as error:
        raise GrammarError(str(error)) from None
    return StartEval(
        dataset, options.trials, options.cases, options.settings, options.vs, tuple(arms)
    )


class _Options:
    """Accumulates `/eval <dataset>` options; `take` consumes one option and its values."""

    def __init__(self, max_trials: int) -> None:
        self.max_trials = max_trials
        self.trials: int | None = None
        self.cases: tuple[str, ...] = ()
        self.settings: dict[str, str] = {}
        self.vs: Baseline = "main"
        self.arms: list[str] = []

    def take(self, words: list[str], index: int) -> int:
        flag, inline = _flag(words[index])
        if flag == "--set":
            return self._take_settings(words, index + 1, inline)
        value, after = _value(flag, words, index, inline)
        if flag == "--trials":
            self.trials = _trials(value, self.max_trials)
        elif flag == "--cases":
            self.cases = _cases(value)
        elif flag == "--vs":
            self.vs = _baseline(value)
        elif flag == "--arm":
            self.arms.append(value)
        else:
            raise GrammarError(f"unknown option '{flag}'")
        return after

    def _take_settings(self, words: list[str], index: int, inline: str | None) -> int:
        pairs = [inline] if inline is not None else []
        while index < len(words) and not words[index].startswith("--"):
            pairs.append(words[index])
            index += 1
        if not pairs:
            raise GrammarError("--set needs at least one key=value")
        for pair in pairs:
            key, value = _setting(pair)
            self.settings[key] = value
        return index


def _flag(word: str) -> tuple[str, str | None]:
    if not word.startswith("--"):
        raise GrammarError(f"unexpected '{word}': options start with --")
    flag, sep, inline = word.partition("=")
    return flag, (inline if sep else None)


def _value(flag: str, words: list[str], index: int, inline: str | None) -> tuple[str, int]:
    if inline is not None:
        return inline, index + 1
    if index + 1 >= len(words) or words[index + 1].startswith("--"):
        raise GrammarError(f"{flag} needs a value")
    return words[index + 1], index + 2


def _trials(value: str, max_trials: int) -> int:
    if not (value.isascii() and value.isdigit() and len(value) <= 6) or not (
        1 <= int(value) <= max_trials
    ):  # ASCII only: "²".isdigit() but int("²") fails; 5,000 digits exceed int()'s limit
        raise GrammarError(f"--trials must be a whole number from 1 to {max_trials}, got '{value}'")
    return int(value)


def _cases(value: str) -> tuple[str, ...]:
    selectors = tuple(s.strip() for s in value.split(",") if s.strip())
    bad = [s for s in selectors if not is_name(s.removeprefix("tag:"))]
    if not selectors or bad:
        got = shown(bad[0] if bad else value)
        raise GrammarError(
            f"--cases takes case ids or tag:T separated by commas, got {got} "
            f"(names are {NAME_RULE})"
        )
    return selectors


def _baseline(value: str) -> Baseline:
    if value == "main":
        return "main"
    if value == "merge-base":
        return "merge-base"
    raise GrammarError(f"--vs must be 'main' or 'merge-base', got '{value}'")


def _setting(pair: str) -> tuple[str, str]:
    try:
        return parse_setting(pair)
    except PlanError as error:
        raise GrammarError(f"--set takes key=value pairs: {error}") from None
