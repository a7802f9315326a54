"""ModalSecretSink (infra/secrets/modal_sink.py) against the fake Modal: named Secrets created and
replaced exactly, failures that say what was written, and the provider injecting what it wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.secrets import SinkError, build_sink
from infra.secrets.modal_sink import ModalSecretSink
from tests.fakes.modal_fake import FakeModal, host_problem
from tests.workflows.providers.kits import make_agent_repo, make_world
from workflows.providers.base import SandboxSpec
from workflows.providers.modal import ModalConfig, ModalProvider
from workflows.settings import Settings


@pytest.fixture
def cloud(tmp_path: Path) -> FakeModal:
    return FakeModal(tmp_path / "cloud")


def stored(cloud: FakeModal, name: str) -> dict[str, str]:
    return dict(json.loads((cloud.root / "secrets" / f"{name}.json").read_text()))


def test_commit_creates_then_replaces_exactly(cloud: FakeModal) -> None:
    sink = ModalSecretSink(cloud)
    assert sink.existing_groups() == set()
    sink.commit({"llm-keys": {"OPENAI_API_KEY": "v1", "OLD_KEY": "x"}, "search": {"K": "s"}})
    assert sink.existing_groups() == {"llm-keys", "search"}
    sink.commit({"llm-keys": {"OPENAI_API_KEY": "v2"}})
    assert stored(cloud, "llm-keys") == {"OPENAI_API_KEY": "v2"}  # the dropped key is gone
    assert stored(cloud, "search") == {"K": "s"}  # groups not committed are kept


def test_a_bad_group_name_writes_nothing(cloud: FakeModal) -> None:
    sink = ModalSecretSink(cloud)
    with pytest.raises(SinkError, match="no Modal Secret was written"):
        sink.commit({"good": {"A": "1"}, "Bad Name": {"B": "2"}})
    assert sink.existing_groups() == set()


def test_a_failure_part_way_says_what_was_written_and_never_a_value(
    cloud: FakeModal, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = cloud.Secret._create_deployed

    def flaky(name: str, values: dict[str, str], **options: Any) -> str:
        if name == "second":
            raise cloud.exception.ServiceError("Modal is unavailable")
        return str(original(name, values, **options))

    monkeypatch.setattr(cloud.Secret, "_create_deployed", flaky)
    sink = ModalSecretSink(cloud)
    groups = {"first": {"A": "secret-one"}, "second": {"B": "secret-two"}, "third": {"C": "3"}}
    with pytest.raises(SinkError) as caught:
        sink.commit(groups)
    message = str(caught.value)
    assert "'second'" in message and "written before it: first" in message
    assert "secret-one" not in message and "secret-two" not in message
    assert sink.existing_groups() == {"first"}


def test_listing_failures_are_sink_errors(
    cloud: FakeModal, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down(**_: Any) -> list[Any]:
        raise cloud.exception.AuthError("token expired")

    monkeypatch.setattr(cloud.Secret.objects, "list", down)
    with pytest.raises(SinkError, match="AuthError"):
        ModalSecretSink(cloud).existing_groups()


def test_settings_select_the_modal_sink() -> None:
    sink = build_sink(Settings(secrets={"sink": "modal"}))
    assert isinstance(sink, ModalSecretSink) and sink.name == "modal"


@pytest.mark.skipif(host_problem() is not None, reason=f"fake Modal: {host_problem()}")
async def test_the_provider_injects_what_the_sink_wrote(cloud: FakeModal, tmp_path: Path) -> None:
    ModalSecretSink(cloud).commit({"llm-keys": {"OPENAI_API_KEY": "sk-synced"}})
    provider = ModalProvider(cloud, ModalConfig(spool_dir=tmp_path / "spool"))
    image = await provider.build_image(make_agent_repo(tmp_path / "repo"), "main", "")
    spec = SandboxSpec(
        run_id="exp/case/arm/0",
        image=image,
        world_dir=make_world(tmp_path / "world"),
        case_files={"case.json": b"{}"},
        secret_groups=("llm-keys",),
    )
    sandbox = await provider.create(spec)
    try:
        seen = await sandbox.exec(["sh", "-c", 'echo "$OPENAI_API_KEY"'])
        assert seen.stdout == b"sk-synced\n"
        listing = await sandbox.list_files("/out")
        assert listing == []  # secrets are environment variables, never files in /out
    finally:
        await sandbox.terminate()
