"""`evalbot doctor` through the real entry point: one line per check with its fix, `--json`, and a
non-zero exit only when something the configured provider (or every experiment) needs is missing.
The checks run against this host for real (bubblewrap, cgroup v1, the embedded Temporal binary)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.cli import evalbot
from workflows.providers.local import host_problem

pytestmark = pytest.mark.skipif(
    host_problem(Path("/sys/fs/cgroup")) is not None, reason="needs a host that runs `local`"
)

NAMES = [
    "root", "host tools", "bubblewrap", "user namespaces", "cgroups", "seccomp", "native runner",
    "disk space", "data file system", "temporal", "database", "github app key", "vault",
]  # fmt: skip


def doctor(tmp_path: Path, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    done = evalbot(tmp_path / "state", tmp_path, "doctor", "--json", env=env)
    assert done.stderr == "" or "Traceback" not in done.stderr
    return done.returncode, json.loads(done.stdout)


def by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in document["checks"]}


def test_this_host_is_ready_and_every_check_has_a_line(tmp_path: Path) -> None:
    done = evalbot(tmp_path / "state", tmp_path, "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    assert [line.split(":")[0].split(maxsplit=1)[1] for line in lines[:-1]] == NAMES
    assert lines[-1] == "evalbot doctor: ready (provider local)"
    checks = {line.split(":")[0].split(maxsplit=1)[1]: line for line in lines[:-1]}
    assert checks["cgroups"].startswith("ok") and checks["cgroups"].endswith("-> mode v1")
    assert checks["bubblewrap"].startswith("ok")
    assert checks["native runner"].startswith("ok")  # `make` installs gcc
    assert "will start the embedded dev server" in checks["temporal"]
    assert checks["vault"].startswith("skip")


def test_missing_requirements_fail_with_their_fix_and_exit_1(tmp_path: Path) -> None:
    code, document = doctor(
        tmp_path,
        {"EVALBOT_SANDBOX_CGROUPS": "v2", "EVALBOT_TEMPORAL_ADDRESS": "127.0.0.1:1"},
    )
    assert code == 1 and document["ok"] is False
    checks = by_name(document)
    failed = {name for name, check in checks.items() if check["status"] == "fail"}
    assert failed == {"cgroups", "temporal"}
    assert "not a cgroup v2" in checks["cgroups"]["detail"]
    assert "EVALBOT_SANDBOX_CGROUPS=auto" in checks["cgroups"]["fix"]
    assert "EVALBOT_TEMPORAL_ADDRESS" in checks["temporal"]["fix"]
    assert all(checks[name]["required"] for name in failed)


def test_without_cgroups_doctor_names_the_mode_and_what_is_weaker(tmp_path: Path) -> None:
    (tmp_path / "no-cgroups").mkdir()
    code, document = doctor(tmp_path, {"EVALBOT_CGROUP_ROOT": str(tmp_path / "no-cgroups")})
    assert code == 0 and document["ok"] is True
    cgroups = by_name(document)["cgroups"]
    assert cgroups["status"] == "warn"
    assert "no-cgroup mode" in cgroups["detail"]
    assert "RLIMIT_AS" in cgroups["detail"] and "no rate limit" in cgroups["detail"]


def test_an_unreachable_database_is_required(tmp_path: Path) -> None:
    url = "postgresql://nobody@127.0.0.1:1/evalbot"
    code, document = doctor(tmp_path, {"EVALBOT_DATABASE_URL": url})
    assert code == 1
    database = by_name(document)["database"]
    assert database["status"] == "fail" and "EVALBOT_DATABASE_URL" in database["fix"]


@pytest.fixture
def sealed_vault() -> Iterator[str]:
    """Vault's health endpoint answering as a sealed Vault does (HTTP 503)."""

    class Sealed(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"initialized": true, "sealed": true}'
            self.send_response(503 if self.path == "/v1/sys/health" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Sealed)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_broken_optional_integrations_warn_but_do_not_fail(
    tmp_path: Path, sealed_vault: str
) -> None:
    (tmp_path / "key.pem").write_text("not a key\n")
    env = {
        "EVALBOT_GITHUB_APP_ID": "123",
        "EVALBOT_GITHUB_PRIVATE_KEY_PATH": str(tmp_path / "key.pem"),
        "EVALBOT_VAULT_ADDR": sealed_vault,
    }
    done = evalbot(tmp_path / "state", tmp_path, "doctor", env=env)
    assert done.returncode == 0
    lines = {line.split(":")[0].split(maxsplit=1)[1]: line for line in done.stdout.splitlines()}
    assert lines["github app key"].startswith("warn") and "not a PEM" in lines["github app key"]
    assert lines["vault"].startswith("warn") and "sealed" in lines["vault"]


def test_a_good_github_app_key_loads(tmp_path: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    (tmp_path / "key.pem").write_bytes(pem)
    env = {
        "EVALBOT_GITHUB_APP_ID": "123",
        "EVALBOT_GITHUB_PRIVATE_KEY_PATH": str(tmp_path / "key.pem"),
    }
    _, document = doctor(tmp_path, env)
    assert by_name(document)["github app key"]["status"] == "ok"
