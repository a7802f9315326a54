"""How an `evalbot` command fails: one sentence on stderr and an exit code, never a traceback.

A command raises a `CommandError` — `CommandError.bad_input("no experiment 'x'")` and the like: one
named constructor, and one subclass, per exit code of docs/cli.md — and is decorated with
`@command_errors` (the innermost decorator, right above `def`). The decorator prints
`evalbot: error: <sentence>` on stderr and exits with the error's code. On the way it turns the
libraries' known exceptions into a `CommandError` (`LIBRARY_ERRORS`): bad input (catalog, plan,
repository) exits 2; what could not run (store, Temporal dev server, a host the provider refuses,
runtime and OS errors) exits 1. `CommandErrors(...)` puts a command's own mapping before those.
Anything else passes through to click and to bot/cli.py's `main()`, the last line of defence.

Errors go to stderr only, with `--json` too (docs/cli.md): stdout holds one JSON document or
nothing. The sentence is one line: line breaks in a library's message become " / ". With
`EVALBOT_DEBUG=1` the library exception's traceback is printed above the sentence.

A result with a non-zero exit code is not an error: `wait` (1 failed, 3 still running), `estimate
--budget-usd` (4), `regrade` (1) and the `--check` flags (1) print their result and exit with
`sys.exit(ExitCode....)`, without a sentence.
"""

from __future__ import annotations

import os
import traceback
from contextlib import ContextDecorator
from enum import IntEnum
from types import TracebackType
from typing import IO, Any, ClassVar

import click

from workflows.catalog.catalog_errors import CatalogError, UnknownNameError
from workflows.catalog.names import InvalidNameError
from workflows.engine.devserver import DevServerError
from workflows.engine.planning import PlanError
from workflows.engine.repos import RepoError
from workflows.providers.base import HostUnsupported
from workflows.store import StoreError


class ExitCode(IntEnum):
    """The exit codes of docs/cli.md ("Exit codes")."""

    OK = 0
    COULD_NOT_RUN = 1
    BAD_INPUT = 2
    STILL_RUNNING = 3
    OVER_BUDGET = 4


def one_line(message: str) -> str:
    """The message on one line: its line breaks become " / "."""
    return " / ".join(message.splitlines())


def debugging() -> bool:
    """`EVALBOT_DEBUG` is set: show tracebacks."""
    return bool(os.environ.get("EVALBOT_DEBUG"))


class CommandError(click.ClickException):
    """A command's failure: one sentence for the user, and the exit code that classifies it (a
    class attribute, as click has it: one subclass per code, made by the named constructors)."""

    exit_code: ClassVar[int] = ExitCode.COULD_NOT_RUN

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))

    @staticmethod
    def could_not_run(message: str) -> CommandError:
        """Exit 1: the store, Temporal, repository I/O or the host failed."""
        return CouldNotRun(message)

    @staticmethod
    def bad_input(message: str) -> CommandError:
        """Exit 2: an unknown name, a bad flag, something that exists already."""
        return BadInput(message)

    @staticmethod
    def still_running(message: str) -> CommandError:
        """Exit 3: the experiment has not finished."""
        return StillRunning(message)

    @staticmethod
    def over_budget(message: str) -> CommandError:
        """Exit 4: over the budget, or the repository's daily cap is spent."""
        return OverBudget(message)

    @staticmethod
    def with_code(message: str, exit_code: ExitCode) -> CommandError:
        """The error for `exit_code` (1 to 4)."""
        return _BY_CODE[exit_code](message)

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"evalbot: error: {self.format_message()}", file=file, err=True)


class CouldNotRun(CommandError):
    exit_code = ExitCode.COULD_NOT_RUN


class BadInput(CommandError):
    exit_code = ExitCode.BAD_INPUT


class StillRunning(CommandError):
    exit_code = ExitCode.STILL_RUNNING


class OverBudget(CommandError):
    exit_code = ExitCode.OVER_BUDGET


_BY_CODE: dict[int, type[CommandError]] = {
    kind.exit_code: kind for kind in (CouldNotRun, BadInput, StillRunning, OverBudget)
}


ErrorTypes = type[Exception] | tuple[type[Exception], ...]
ErrorMap = tuple[tuple[ErrorTypes, ExitCode], ...]

LIBRARY_ERRORS: ErrorMap = (
    ((UnknownNameError, InvalidNameError, CatalogError, PlanError, RepoError), ExitCode.BAD_INPUT),
    ((StoreError, DevServerError, HostUnsupported, RuntimeError, OSError), ExitCode.COULD_NOT_RUN),
)
"""Checked in order: RepoError and DevServerError are RuntimeErrors."""

_CLICKS_OWN = (click.ClickException, click.exceptions.Exit, click.exceptions.Abort)


class CommandErrors(ContextDecorator):
    """Decorator (and context manager) reporting a `CommandError`, or a library exception that
    `mapping` names, as one sentence on stderr, then exiting with its code.

    `CommandErrors((SandboxError, ExitCode.BAD_INPUT))` checks its pairs before LIBRARY_ERRORS.
    """

    def __init__(self, *first: tuple[ErrorTypes, ExitCode]) -> None:
        self.mapping: ErrorMap = (*first, *LIBRARY_ERRORS)

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not isinstance(error, Exception):  # none, SystemExit, KeyboardInterrupt: as they are
            return
        failure = self.failure(error)
        if failure is None:
            return
        if failure is not error and debugging():
            traceback.print_exception(error)
        failure.show()
        raise SystemExit(failure.exit_code) from None

    def failure(self, error: Exception) -> CommandError | None:
        """The CommandError `error` is or maps to; None to let it through."""
        if isinstance(error, CommandError):
            return error
        # click's own (ctx.exit is a RuntimeError) and a closed stdout: click handles them
        if isinstance(error, (*_CLICKS_OWN, BrokenPipeError)):
            return None
        for types, code in self.mapping:
            if isinstance(error, types):
                return CommandError.with_code(str(error), code)
        return None


command_errors = CommandErrors()
"""`@command_errors`: a command's failures as one sentence and an exit code (LIBRARY_ERRORS)."""
