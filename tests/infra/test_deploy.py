"""infra/: the compose file and Dockerfiles parse, every evalbot command, flag and EVALBOT_*
variable they use exists in the CLI and the settings, and the entrypoints start here (Docker
itself cannot run on the build machines)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click
import httpx
import pytest
import yaml

from bot.cli import _register_commands, cli
from tests.bot.conftest import free_port
from workflows.settings import setting_fields

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "infra" / "compose.yml"
DOCKERFILES = sorted((ROOT / "infra" / "docker").glob("*.Dockerfile"))
ENV_NAME = re.compile(r"\bEVALBOT_[A-Z0-9_]+")


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def settings_env_names() -> set[str]:
    return {variable for _, variable, _ in setting_fields()}


def check_evalbot_argv(argv: list[str]) -> None:
    """`evalbot SUB [SUB] --flag ...`: the (sub)command exists and accepts every flag given."""
    _register_commands()
    command: click.Command = cli
    words = list(argv)
    while isinstance(command, click.Group) and words and not words[0].startswith("-"):
        name = words.pop(0)
        assert name in command.commands, f"no command '{name}' in {argv}"
        command = command.commands[name]
    params = {o: p for p in command.params for o in getattr(p, "opts", [])}
    for i, word in enumerate(words):
        if word.startswith("--"):
            assert word in params, f"{argv}: unknown flag {word}"
            param = params[word]
            if isinstance(param.type, click.Choice) and i + 1 < len(words):
                assert words[i + 1] in param.type.choices, (argv, words[i + 1])


def test_compose_runs_bot_workers_per_role_temporal_and_postgres() -> None:
    services = compose()["services"]
    assert {"bot", "postgres", "temporal", "worker-runs", "worker-collect", "worker-score"} <= set(
        services
    )
    roles = set()
    for name, service in services.items():
        if name.startswith("worker-"):
            command = service["command"]
            assert command[0] == "--role" and len(command) == 2
            roles.add(command[1])
            assert service["build"]["dockerfile"] == "infra/docker/worker.Dockerfile"
    assert roles == {"runs", "collect", "score"}
    env = services["bot"]["environment"]
    assert env["EVALBOT_TEMPORAL_ADDRESS"] == "temporal:7233"
    assert env["EVALBOT_DATABASE_URL"].startswith("postgresql+psycopg2://")


def test_every_evalbot_variable_in_infra_is_a_setting() -> None:
    known = settings_env_names()
    texts = [COMPOSE.read_text(), *(d.read_text() for d in DOCKERFILES)]
    used = {name for text in texts for name in ENV_NAME.findall(text)}
    assert used, "no EVALBOT_ variables found"
    assert used <= known, sorted(used - known)


def _dockerfile_exec(text: str, instruction: str) -> list[str]:
    match = re.search(rf"^{instruction} (\[.*\])$", text, re.M)
    assert match, instruction
    return list(yaml.safe_load(match.group(1)))


def test_dockerfiles_parse_and_run_existing_commands() -> None:
    assert {d.name for d in DOCKERFILES} == {"bot.Dockerfile", "worker.Dockerfile"}
    for dockerfile in DOCKERFILES:
        text = dockerfile.read_text()
        lines = [
            line for line in text.replace("\\\n", " ").splitlines()
            if line.strip() and not line.startswith("#")
        ]  # fmt: skip
        assert lines[0].startswith("FROM python:3.11")
        for line in lines:
            instruction = line.split()[0]
            assert instruction in {"FROM", "ARG", "ENV", "RUN", "WORKDIR", "COPY", "USER",
                                   "EXPOSE", "HEALTHCHECK", "STOPSIGNAL", "CMD",
                                   "ENTRYPOINT"}, line  # fmt: skip
            if instruction == "COPY":
                for source in line.split()[1:-1]:
                    assert (ROOT / source).exists(), f"{dockerfile.name}: COPY {source}"
    bot = _dockerfile_exec((ROOT / "infra/docker/bot.Dockerfile").read_text(), "CMD")
    assert bot[0] == "evalbot"
    check_evalbot_argv(bot[1:])
    worker = (ROOT / "infra/docker/worker.Dockerfile").read_text()
    entry = _dockerfile_exec(worker, "ENTRYPOINT")
    # tini as PID 1 forwards SIGTERM and reaps the detached sandbox runners (docs/deploy.md)
    assert entry[:3] == ["/usr/bin/tini", "--", "evalbot"] and " tini " in worker
    check_evalbot_argv(entry[3:] + _dockerfile_exec(worker, "CMD"))
    # the local provider (the default) needs root; an unprivileged user is a build argument
    assert re.search(r"^ARG WORKER_USER=root$", worker, re.M)
    assert re.search(r"^USER \$\{WORKER_USER\}$", worker, re.M)


def test_every_compose_command_exists() -> None:
    for name, service in compose()["services"].items():
        command = service.get("command")
        if not command:
            continue
        if name.startswith("worker-"):
            check_evalbot_argv(["worker", *command])
        elif command[0] == "evalbot":
            check_evalbot_argv(command[1:])
        else:
            assert "python -m workflows.store upgrade" in " ".join(command)


def test_the_migrate_entrypoint_runs_here(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'evalbot.db'}"
    ran = subprocess.run([sys.executable, "-m", "workflows.store", "upgrade", url],
                         capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "evalbot.db").is_file()


@pytest.mark.timeout(180)
def test_the_bot_entrypoint_serves_healthz_metrics_and_guards_the_dashboard(
    tmp_path: Path,
) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALBOT_")} | {
        "EVALBOT_DATA_DIR": str(tmp_path / "state"),
        "EVALBOT_GITHUB_WEBHOOK_SECRET": "secret",
        "EVALBOT_GITHUB_TOKEN": "ghs_test",
        "EVALBOT_DASHBOARD_TOKEN": "local",
        "EVALBOT_DASHBOARD_METRICS_TOKEN": "scrape",
        "EVALBOT_GITHUB_API_URL": "http://127.0.0.1:9",  # never reached
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "bot", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the bot did not start"
            time.sleep(0.5)
        assert httpx.get(f"{base}/metrics").status_code == 401
        metrics = httpx.get(f"{base}/metrics", headers={"Authorization": "Bearer scrape"})
        assert metrics.status_code == 200 and "evalbot_judge_errors_total 0" in metrics.text
        assert httpx.get(f"{base}/dashboard/").status_code == 401
        signed = httpx.get(f"{base}/dashboard/", headers={"Authorization": "Bearer local"})
        assert signed.status_code == 200 and "Experiments" in signed.text
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
