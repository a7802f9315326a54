"""bot/commands/errors.py: a command fails one way — `evalbot: error: <sentence>`, one line on
stderr, nothing on stdout, no traceback, and the documented exit code (docs/cli.md) — and the
libraries' known exceptions are mapped to those codes. Every `evalbot` command uses it."""

from __future__ import annotations

import ast
import errno
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from bot.cli import _register_commands, cli
from bot.commands.errors import (
    LIBRARY_ERRORS,
    CommandError,
    CommandErrors,
    ExitCode,
    command_errors,
)
from workflows.catalog.catalog_errors import CatalogError, UnknownNameError
from workflows.catalog.names import InvalidNameError
from workflows.engine.devserver import DevServerError
from workflows.engine.planning import PlanError
from workflows.engine.repos import RepoError
from workflows.providers.base import HostUnsupported, SandboxError
from workflows.store import StoreError

COMMANDS = Path(__file__).resolve().parents[2] / "bot" / "commands"


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALBOT_DEBUG", raising=False)


def failing(error: BaseException, errors: CommandErrors = command_errors) -> click.Command:
    """A command that prints a line on stdout, then raises `error`."""

    @click.command("failing")
    @errors
    def command() -> None:
        click.echo("partial output")
        raise error

    return command


def invoke(command: click.Command, *args: str) -> Result:
    return CliRunner().invoke(command, list(args))


def assert_one_sentence(result: Result, code: int, sentence: str) -> None:
    assert result.exit_code == code, result.output
    assert result.stderr == f"evalbot: error: {sentence}\n"
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)  # reported, not raised


def test_the_exit_codes_are_the_documented_ones() -> None:
    table = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    assert [int(code) for code in ExitCode] == [0, 1, 2, 3, 4]
    for code in (1, 2, 3, 4):
        assert f"\n| {code} | " in table
    made = [
        CommandError.could_not_run("x"),
        CommandError.bad_input("x"),
        CommandError.still_running("x"),
        CommandError.over_budget("x"),
    ]
    assert [e.exit_code for e in made] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (CommandError.could_not_run("the store is down"), 1),
        (CommandError.bad_input("the store is down"), 2),
        (CommandError.still_running("the store is down"), 3),
        (CommandError.over_budget("the store is down"), 4),
        (CommandError.with_code("the store is down", ExitCode.BAD_INPUT), 2),
        (CommandError("the store is down"), 1),
    ],
)
def test_a_command_error_is_one_line_on_stderr_and_its_exit_code(
    error: CommandError, code: int
) -> None:
    result = invoke(failing(error))
    assert_one_sentence(result, code, "the store is down")
    assert result.stdout == "partial output\n"  # what was printed before stays; nothing after


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (UnknownNameError("dataset", "nope", ["tiny"]), 2),
        (CatalogError("case.toml", "criteria", "must not be empty"), 2),
        (PlanError("--base and --head go together"), 2),
        (RepoError("unknown ref 'x' in /repo"), 2),  # a RuntimeError, mapped as bad input first
        (StoreError("the database is not migrated"), 1),
        (DevServerError("the dev server did not start"), 1),
        (HostUnsupported("the local sandbox provider cannot run here: no cgroups"), 1),
        (RuntimeError("event loop closed"), 1),
        (OSError("disk full"), 1),
        (FileNotFoundError(errno.ENOENT, "No such file or directory"), 1),
    ],
)
def test_library_errors_are_mapped_to_their_exit_code(error: Exception, code: int) -> None:
    assert_one_sentence(invoke(failing(error)), code, str(error))


def test_the_mapping_is_the_one_the_engine_commands_had() -> None:
    bad_input = (UnknownNameError, InvalidNameError, CatalogError, PlanError, RepoError)
    could_not_run = (StoreError, DevServerError, HostUnsupported, RuntimeError, OSError)
    expected = ((bad_input, ExitCode.BAD_INPUT), (could_not_run, ExitCode.COULD_NOT_RUN))
    assert expected == LIBRARY_ERRORS


@pytest.mark.parametrize("error", [ValueError("a bug"), KeyError("a bug"), SandboxError("x")])
def test_other_exceptions_pass_through_to_main(error: Exception) -> None:
    result = invoke(failing(error))
    assert result.exception is error and result.stderr == ""


def test_a_multi_line_message_becomes_one_line() -> None:
    result = invoke(failing(RepoError("git fetch failed:\nfatal: no such remote\r\nhint: x")))
    assert_one_sentence(result, 2, "git fetch failed: / fatal: no such remote / hint: x")
    assert str(CommandError.bad_input("a\nb")) == "a / b"


def test_a_commands_own_mapping_comes_first() -> None:
    own = CommandErrors(((SandboxError, StoreError), ExitCode.BAD_INPUT))
    assert_one_sentence(invoke(failing(StoreError("locked"), own)), 2, "locked")
    assert_one_sentence(invoke(failing(SandboxError("no image"), own)), 2, "no image")
    assert_one_sentence(invoke(failing(OSError("disk full"), own)), 1, "disk full")
    assert_one_sentence(invoke(failing(StoreError("locked"))), 1, "locked")  # default: 1


def test_results_with_an_exit_code_and_clicks_own_exceptions_are_left_alone() -> None:
    @click.command()
    @click.argument("how")
    @click.pass_context
    @command_errors
    def command(ctx: click.Context, how: str) -> None:
        if how == "exit":
            sys.exit(ExitCode.STILL_RUNNING)
        if how == "ctx-exit":  # click.exceptions.Exit is a RuntimeError
            ctx.exit(0)
        raise click.UsageError("bad usage")

    assert invoke(command, "exit").exit_code == 3
    assert invoke(command, "exit").stderr == ""
    ctx_exit = invoke(command, "ctx-exit")
    assert ctx_exit.exit_code == 0 and ctx_exit.output == ""
    usage = invoke(command, "usage")
    assert usage.exit_code == 2 and "Error: bad usage" in usage.stderr
    assert "evalbot: error" not in usage.stderr


def test_a_closed_stdout_is_left_to_click() -> None:
    error = BrokenPipeError(errno.EPIPE, "Broken pipe")
    result = invoke(failing(error))
    assert result.exit_code == 1 and "evalbot: error" not in result.stderr


def test_debug_shows_the_traceback_above_the_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALBOT_DEBUG", "1")
    result = invoke(failing(StoreError("the database is not migrated")))
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1] == "evalbot: error: the database is not migrated"


def test_the_context_manager_form() -> None:
    @click.command()
    def command() -> None:
        with command_errors:
            raise PlanError("say what to compare")

    assert_one_sentence(invoke(command), 2, "say what to compare")


def test_a_command_error_outside_the_decorator_reads_the_same() -> None:
    @click.command()
    def command() -> None:
        raise CommandError.over_budget("the daily cap is spent")

    result = invoke(command)
    assert result.exit_code == 4
    assert result.stderr == "evalbot: error: the daily cap is spent\n"


def _commands(group: click.Group) -> Iterator[click.Command]:
    for command in group.commands.values():
        yield command
        if isinstance(command, click.Group):
            yield from _commands(command)


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return ast.unparse(target)


def _error_decorators(tree: ast.Module) -> set[str]:
    """`command_errors`, and any module-level name bound to `CommandErrors(...)`."""
    names = {"command_errors"}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and _decorator_name(node.value) == "CommandErrors"
        ):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _is_command(decorator: str) -> bool:
    return decorator.endswith((".command", ".group"))


def _only_a_docstring(node: ast.FunctionDef) -> bool:
    """A group's callback that runs nothing (`secrets`, `cases`): nothing to report."""
    return len(node.body) == 1 and isinstance(node.body[0], ast.Expr)


def test_every_command_reports_its_errors_through_the_decorator() -> None:
    """Each click command or group in bot/commands has the decorator innermost (right above
    `def`, so that the whole body is covered), and every registered command is one of them."""
    checked: dict[str, set[str]] = {}
    for path in sorted(COMMANDS.glob("*.py")):
        tree = ast.parse(path.read_text())
        wrappers = _error_decorators(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            names = [_decorator_name(d) for d in node.decorator_list]
            if any(_is_command(n) for n in names):
                if not _only_a_docstring(node):
                    assert names[-1] in wrappers, f"{path.name}: {node.name} lacks @command_errors"
                checked.setdefault(f"bot.commands.{path.stem}", set()).add(node.name)
    _register_commands()
    registered = list(_commands(cli))
    assert len(registered) > 15
    for command in registered:
        callback = command.callback
        assert callback is not None
        module, name = callback.__module__, getattr(callback, "__name__", "")
        assert name in checked.get(module, set()), f"{command.name}: {module}.{name}"


def test_no_command_imports_the_cli_module() -> None:
    for path in COMMANDS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.module != "bot.cli" and not (
                    node.module == "bot" and any(a.name == "cli" for a in node.names)
                ), path.name
            elif isinstance(node, ast.Import):
                assert all(a.name != "bot.cli" for a in node.names), path.name
