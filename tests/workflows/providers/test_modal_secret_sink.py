"""ModalSecretSink (infra/secrets/modal_sink.py) on the real `modal` SDK against the Modal test
server: named Secrets created and replaced exactly, failures (injected by the server) that say
what was written, and the provider injecting what it wrote."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import modal
import pytest

from infra.secrets import SinkError, build_sink
from infra.secrets.modal_sink import ModalSecretSink
from tests.fakes.modal_server.fixture import ModalTestServer
from tests.workflows.providers.kits import make_agent_repo, make_world
from workflows.providers.base import SandboxSpec
from workflows.providers.modal import ModalConfig, ModalProvider
from workflows.settings import Settings


@pytest.fixture
def server(modal_server: ModalTestServer) -> Iterator[ModalTestServer]:
    yield modal_server
    modal_server.configure(faults={})


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def stored(server: ModalTestServer, name: str) -> dict[str, str]:
    return dict(server.cloud.secret(name)["env"])


def test_commit_creates_then_replaces_exactly(server: ModalTestServer) -> None:
    keys, search = unique("llm-keys"), unique("search")
    sink = ModalSecretSink(modal)
    assert not {keys, search} & sink.existing_groups()
    sink.commit({keys: {"OPENAI_API_KEY": "v1", "OLD_KEY": "x"}, search: {"K": "s"}})
    assert {keys, search} <= sink.existing_groups()
    sink.commit({keys: {"OPENAI_API_KEY": "v2"}})
    assert stored(server, keys) == {"OPENAI_API_KEY": "v2"}  # the dropped key is gone
    assert stored(server, search) == {"K": "s"}  # groups not committed are kept


def test_a_bad_group_name_writes_nothing(server: ModalTestServer) -> None:
    good = unique("good")
    sink = ModalSecretSink(modal)
    with pytest.raises(SinkError, match="no Modal Secret was written"):
        sink.commit({good: {"A": "1"}, "Bad Name": {"B": "2"}})
    assert good not in sink.existing_groups()


def test_a_failure_part_way_says_what_was_written_and_never_a_value(
    server: ModalTestServer,
) -> None:
    first, second, third = unique("first"), unique("second"), unique("third")
    server.configure(faults={f"SecretGetOrCreate:{second}": "Modal is unavailable"})
    sink = ModalSecretSink(modal)
    groups = {first: {"A": "secret-one"}, second: {"B": "secret-two"}, third: {"C": "3"}}
    with pytest.raises(SinkError) as caught:
        sink.commit(groups)
    message = str(caught.value)
    assert f"'{second}'" in message and f"written before it: {first}" in message
    assert "secret-one" not in message and "secret-two" not in message
    existing = sink.existing_groups()
    assert first in existing and second not in existing and third not in existing


def test_listing_failures_are_sink_errors(server: ModalTestServer) -> None:
    server.configure(faults={"SecretList": "token expired"})
    with pytest.raises(SinkError, match="PermissionDeniedError"):
        ModalSecretSink(modal).existing_groups()


def test_settings_select_the_modal_sink() -> None:
    sink = build_sink(Settings(secrets={"sink": "modal"}))
    assert isinstance(sink, ModalSecretSink) and sink.name == "modal"


async def test_the_provider_injects_what_the_sink_wrote(
    server: ModalTestServer, tmp_path: Path
) -> None:
    group = unique("llm-keys")
    ModalSecretSink(modal).commit({group: {"OPENAI_API_KEY": "sk-synced"}})
    config = ModalConfig(app_name="evalbot-test-sink", spool_dir=tmp_path / "spool")
    provider = ModalProvider(modal, config)
    image = await provider.build_image(make_agent_repo(tmp_path / "repo"), "main", "")
    spec = SandboxSpec(
        run_id="exp/case/arm/0",
        image=image,
        world_dir=make_world(tmp_path / "world"),
        case_files={"case.json": b"{}"},
        secret_groups=(group,),
    )
    sandbox = await provider.create(spec)
    try:
        seen = await sandbox.exec(["sh", "-c", 'echo "$OPENAI_API_KEY"'])
        assert seen.stdout == b"sk-synced\n"
        listing = await sandbox.list_files("/out")
        assert listing == []  # secrets are environment variables, never files in /out
    finally:
        await sandbox.terminate()
