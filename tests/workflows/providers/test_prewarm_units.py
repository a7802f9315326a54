"""The pure parts of prewarming: image-reference labels, the dependency manifest, retention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from infra.prewarm.prewarm_jobs import repo_identity, retention_candidates
from workflows.prewarm.image_label import (
    ImageOrigin,
    duration,
    image_path,
    split_reference,
    with_origin,
)
from workflows.prewarm.manifest import changed_manifests, is_manifest
from workflows.store.prewarmed_images import PrewarmRecord


def test_labels_round_trip_and_plain_references_stay_plain() -> None:
    origin = ImageOrigin("full", 192.04, "a" * 40, 3700.4, "deps:pyproject.toml,uv.lock")
    reference = with_origin("/data/images/repo-1/" + "b" * 40 + "/repo", origin)
    image, parsed = split_reference(reference)
    assert image == "/data/images/repo-1/" + "b" * 40 + "/repo"
    assert parsed == ImageOrigin("full", 192.0, "a" * 12, 3700.0, "deps:pyproject.toml,uv.lock")
    assert split_reference("/plain/repo") == ("/plain/repo", None)
    assert split_reference("/odd#name/repo") == ("/odd#name/repo", None)  # not a label
    assert image_path(with_origin("/x/repo", ImageOrigin("cold", 1.0))) == "/x/repo"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(4.23, "4.2s"), (45, "45s"), (192, "3m12s"), (3600 * 5 + 180, "5h03m")],
)
def test_durations_read_like_the_report(seconds: float, text: str) -> None:
    assert duration(seconds) == text


@pytest.mark.parametrize(
    "path",
    [
        "pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "requirements-dev.txt",
        "requirements/base.txt", "services/api/package.json", "package-lock.json", "uv.lock",
        "poetry.lock", "yarn.lock", "pnpm-lock.yaml", "Cargo.lock", "go.sum", "evalbot.toml",
    ],
)  # fmt: skip
def test_dependency_manifests_are_recognised_at_any_depth(path: str) -> None:
    assert is_manifest(path)


def test_code_changes_are_not_manifest_changes() -> None:
    changed = ["legal_agent/run.py", "README.md", "docs/requirements.md", "setup_notes.txt"]
    assert changed_manifests(changed) == []
    assert changed_manifests([*changed, "requirements.txt", "a/package.json"]) == [
        "a/package.json",
        "requirements.txt",
    ]


def record(repo: str, hours_ago: int, provider: str = "local") -> PrewarmRecord:
    at = datetime(2026, 11, 29, 12, tzinfo=UTC) - timedelta(hours=hours_ago)
    return PrewarmRecord(repo=repo, commit=f"{hours_ago:040d}", provider=provider,
                         reference=f"{repo}-{provider}-{hours_ago}", build_seconds=60.0,
                         created_at=at, checked_at=at)  # fmt: skip


def test_retention_keeps_the_newest_per_repo_and_provider() -> None:
    records = [record("a", h) for h in (5, 1, 3, 2)] + [record("b", 9), record("a", 7, "modal")]
    doomed = retention_candidates(records, keep_last=2)
    assert sorted(r.reference for r in doomed) == ["a-local-3", "a-local-5"]
    assert retention_candidates(records, keep_last=10) == []


def test_repo_identity_is_the_url_or_an_absolute_path() -> None:
    assert repo_identity("https://github.com/acme/agent.git") == "https://github.com/acme/agent.git"
    assert repo_identity("git@github.com:acme/agent.git") == "git@github.com:acme/agent.git"
    assert repo_identity(".").startswith("/")
