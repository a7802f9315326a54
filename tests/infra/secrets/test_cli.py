"""`evalbot secrets sync | status | policy` as a person or the scheduled job runs them."""

from __future__ import annotations

import json
from pathlib import Path

import hvac
import pytest
from click.testing import CliRunner

from bot.commands.secrets import secrets_group
from tests.infra.secrets.conftest import put_secret
from tests.support.openbao import OpenBaoServer
from workflows.ports import free_port
from workflows.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def mapping_file(tmp_path: Path, prefix: str) -> Path:
    path = tmp_path / "secrets.toml"
    path.write_text(f'[groups.llm-keys]\npath = "{prefix}/llm"\nkeys = ["OPENAI_API_KEY"]\n')
    return path


def run(settings: Settings, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(secrets_group, list(args), obj=settings)
    return result.exit_code, result.stdout, result.stderr


def test_sync_then_status_then_dry_run_after_a_rotation(
    tmp_path: Path,
    openbao: OpenBaoServer,
    root_client: hvac.Client,
    prefix: str,
    mapping_file: Path,
) -> None:
    settings = Settings(
        data_dir=tmp_path / "evalbot",
        secrets={"vault_addr": openbao.url, "vault_token": "root", "mapping_path": mapping_file},
    )
    put_secret(root_client, f"{prefix}/llm", {"OPENAI_API_KEY": "sk-cli-first-0001"})

    code, out, _ = run(settings, "sync")
    assert code == 0
    assert out.splitlines() == [
        f"llm-keys: created v1 from secret/{prefix}/llm",
        "1 group(s) checked, 1 changed",
    ]

    code, out, _ = run(settings, "status", "--json")
    [status] = json.loads(out)["groups"]
    assert (code, status["group"], status["version"], status["flags"]) == (0, "llm-keys", 1, [])

    put_secret(root_client, f"{prefix}/llm", {"OPENAI_API_KEY": "sk-cli-second-0002"})
    code, out, _ = run(settings, "sync", "--dry-run")
    assert code == 0
    assert (
        f"llm-keys: would update v1 -> v2 from secret/{prefix}/llm (changed: OPENAI_API_KEY)" in out
    )
    assert "sk-cli" not in out


def test_sync_with_vault_down_exits_non_zero_with_one_line(
    tmp_path: Path, mapping_file: Path
) -> None:
    address = f"http://127.0.0.1:{free_port()}"
    settings = Settings(
        data_dir=tmp_path / "evalbot",
        secrets={
            "vault_addr": address,
            "vault_token": "root",
            "vault_timeout_s": 2,
            "mapping_path": mapping_file,
        },
    )

    code, out, err = run(settings, "sync")

    assert code != 0
    assert out == ""
    assert err.startswith(f"evalbot: error: secret sync failed: Vault at {address} is unreachable")
    assert len(err.strip().splitlines()) == 1


def test_status_check_fails_while_a_group_was_never_synced(
    tmp_path: Path, mapping_file: Path
) -> None:
    settings = Settings(data_dir=tmp_path / "evalbot", secrets={"mapping_path": mapping_file})

    code, out, _ = run(settings, "status", "--check")

    assert code == 1
    assert "llm-keys" in out and "never synced" in out


def test_policy_prints_the_checked_in_policy_for_the_checked_in_mapping(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path, secrets={"mapping_path": REPO_ROOT / "infra" / "secrets.toml"}
    )

    code, out, _ = run(settings, "policy")

    assert code == 0
    assert out == (REPO_ROOT / "infra" / "vault-policy.hcl").read_text()
