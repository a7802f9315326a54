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
from bot.webhooks.signature import sign
from workflows.ports import free_port
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


def test_compose_is_the_production_shape() -> None:
    """PostgreSQL, Temporal, an S3 server, the app in two processes, two worker hosts with all
    roles and a disk each (shared: only the database, Temporal and the bucket), Prometheus optional
    and scraping exactly those workers' metrics addresses."""
    services = compose()["services"]
    assert {"postgres", "temporal", "minio", "bucket", "migrate", "bot", "worker-a",
            "worker-b", "prometheus"} <= set(services)  # fmt: skip
    bot = services["bot"]
    assert bot["command"][-2:] == ["--processes", "2"]
    assert bot["environment"]["EVALBOT_TEMPORAL_ADDRESS"] == "temporal:7233"
    assert bot["environment"]["EVALBOT_DATABASE_URL"].startswith("postgresql+psycopg2://")
    workers = {n: s for n, s in services.items() if n.startswith("worker-")}
    assert len(workers) == 2
    disks = []
    targets = set()
    for name, worker in workers.items():
        assert worker["build"]["dockerfile"] == "infra/docker/worker.Dockerfile"
        roles = {worker["command"][i + 1] for i, w in enumerate(worker["command"]) if w == "--role"}
        assert roles == {"runs", "collect", "score"}, name
        env = worker["environment"]
        assert env["EVALBOT_BLOB_URL"].startswith("s3://")
        assert env["EVALBOT_BLOB_ENDPOINT_URL"] == "http://minio:9000"
        assert env["EVALBOT_HOST_AFFINITY"] == "true", name  # stages go to the sandbox's host
        for setting in ("EVALBOT_METRICS_WORKER_ADDRESS", "EVALBOT_METRICS_TEMPORAL_ADDRESS"):
            targets.add(f"{worker['hostname']}:{env[setting].rpartition(':')[2]}")
        disks += [v.split(":")[0] for v in worker["volumes"]]
    assert len(set(disks)) == len(disks) == 2, disks  # no disk shared between hosts
    assert len({w["hostname"] for w in workers.values()}) == 2  # distinct host ids (docs/engine.md)
    assert services["prometheus"]["profiles"] == ["monitoring"]
    scrape = yaml.safe_load((ROOT / "infra" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in scrape["scrape_configs"]}
    scraped = {t for j in jobs.values() if j["job_name"].startswith("evalbot-worker")
               or j["job_name"] == "evalbot-temporal-sdk"
               for c in j["static_configs"] for t in c["targets"]}  # fmt: skip
    assert scraped == targets
    assert jobs["evalbot-app"]["static_configs"][0]["targets"] == ["bot:8000"]
    assert jobs["evalbot-app"]["authorization"]["credentials_file"]  # /metrics needs the token


def test_every_evalbot_variable_in_infra_is_a_setting() -> None:
    known = settings_env_names()
    manifests = (ROOT / "infra" / "k8s").glob("*.yaml")
    texts = [COMPOSE.read_text(), *(d.read_text() for d in (*DOCKERFILES, *manifests))]
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
        if not command or "build" not in service:  # not an evalbot image
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
    port, metrics_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALBOT_")} | {
        "EVALBOT_DATA_DIR": str(tmp_path / "state"),
        "EVALBOT_GITHUB_WEBHOOK_SECRET": "secret",
        "EVALBOT_GITHUB_TOKEN": "ghs_test",
        "EVALBOT_DASHBOARD_TOKEN": "local",
        "EVALBOT_DASHBOARD_METRICS_TOKEN": "scrape",
        "EVALBOT_GITHUB_API_URL": "http://127.0.0.1:9",  # never reached
        "EVALBOT_METRICS_APP_ADDRESS": f"127.0.0.1:{metrics_port}",
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
        assert metrics.status_code == 200 and "# TYPE evalbot_webhook_deliveries" in metrics.text
        # the token-free listener (EVALBOT_METRICS_APP_ADDRESS) answers the same
        private = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics")
        assert private.status_code == 200 and "# TYPE evalbot_webhook_deliveries" in private.text
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


def _wait_healthy(process: subprocess.Popen[str], base: str) -> None:
    deadline = time.monotonic() + 120
    while True:
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "the bot did not start"
        time.sleep(0.5)


def _deliveries(text: str) -> float:
    series = 'evalbot_webhook_deliveries_total{code="200",event="ping"} '
    found = [line for line in text.splitlines() if line.startswith(series)]
    return float(found[0].split()[-1]) if found else 0.0


@pytest.mark.timeout(180)
def test_serve_processes_report_every_process_deliveries(tmp_path: Path) -> None:
    """`serve --processes 2`: the processes count into one multiprocess folder, so the listener at
    EVALBOT_METRICS_APP_ADDRESS (the parent) and /metrics of either process count every ping."""
    port, metrics_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALBOT_")} | {
        "EVALBOT_DATA_DIR": str(tmp_path / "state"),
        "EVALBOT_GITHUB_WEBHOOK_SECRET": "secret",
        "EVALBOT_GITHUB_TOKEN": "ghs_test",
        "EVALBOT_DASHBOARD_METRICS_TOKEN": "scrape",
        "EVALBOT_GITHUB_API_URL": "http://127.0.0.1:9",  # never reached
        "EVALBOT_TEMPORAL_ADDRESS": "127.0.0.1:9",  # connected on first use only: never here
        "EVALBOT_METRICS_APP_ADDRESS": f"127.0.0.1:{metrics_port}",
    }
    argv = [sys.executable, "-m", "bot", "serve", "--port", str(port), "--processes", "2"]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_healthy(process, base)
        body = b'{"zen": "hi"}'
        headers = {"X-GitHub-Event": "ping", "X-GitHub-Delivery": "d",
                   "X-Hub-Signature-256": sign(b"secret", body)}  # fmt: skip
        for _ in range(8):  # a new connection each: either process may take it
            with httpx.Client() as client:
                assert client.post(f"{base}/github/webhook", content=body,
                                   headers=headers).status_code == 200  # fmt: skip
        assert _deliveries(httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text) == 8
        token = {"Authorization": "Bearer scrape"}
        for _ in range(4):
            with httpx.Client() as client:
                assert _deliveries(client.get(f"{base}/metrics", headers=token).text) == 8
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
