"""infra/compose.yml against the Compose specification's JSON schema (check-jsonschema's vendored
copy: no network) and infra/k8s/*.yaml against Kubernetes' own OpenAPI-derived schemas, strict
(kubernetes-validate's bundled copy). Both validators come with the dev extra (`make test`'s
bootstrap). Each is also shown a broken copy, so a validator that accepts anything fails here."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "infra" / "compose.yml"
MANIFESTS = sorted((ROOT / "infra" / "k8s").glob("*.yaml"))
KUBERNETES_VERSION = "1.30.0"  # the oldest minor the manifests promise to work on


def validator(name: str) -> str:
    """The validator's command, next to this Python (the venv) or on PATH."""
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed: run `make bootstrap` (the dev extra brings it)")
    return found


def run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    command = [str(a) for a in argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def check_compose(path: Path) -> subprocess.CompletedProcess[str]:
    return run(validator("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", path)


def check_manifests(*paths: Path) -> subprocess.CompletedProcess[str]:
    tool = validator("kubernetes-validate")
    return run(tool, "--strict", "--quiet", "-k", KUBERNETES_VERSION, *paths)


def test_the_compose_file_follows_the_compose_spec() -> None:
    checked = check_compose(COMPOSE)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_compose_validator_rejects_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "compose.yml"
    text = COMPOSE.read_text()
    assert "    stop_grace_period: 45s" in text
    broken.write_text(text.replace("    stop_grace_period: 45s", "    stop_grace_period: [45]", 1))
    checked = check_compose(broken)
    assert checked.returncode != 0 and "stop_grace_period" in checked.stdout + checked.stderr


def test_the_kubernetes_manifests_validate_strictly() -> None:
    kinds = {p.name for p in MANIFESTS}
    assert {"namespace.yaml", "bot.yaml", "worker-statefulset.yaml", "worker-modal.yaml"} <= kinds
    checked = check_manifests(*MANIFESTS)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_kubernetes_validator_rejects_a_broken_manifest(tmp_path: Path) -> None:
    source = (ROOT / "infra" / "k8s" / "bot.yaml").read_text()
    assert "  replicas: 2\n" in source
    broken = tmp_path / "bot.yaml"
    broken.write_text(source.replace("  replicas: 2\n", "  replica: 2\n", 1))  # a typo
    assert check_manifests(broken).returncode != 0
