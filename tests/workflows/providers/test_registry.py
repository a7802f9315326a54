"""create_provider: settings.sandbox.provider by name, process only when allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.workflows.providers.kits import make_world
from workflows.providers import PROVIDERS, create_provider, register_provider
from workflows.providers.base import ProviderRefused, SandboxSpec
from workflows.providers.local import LocalProvider
from workflows.providers.process import ProcessProvider
from workflows.settings import Settings


def test_local_is_the_default(settings: Settings) -> None:
    provider = create_provider(settings)
    assert isinstance(provider, LocalProvider)
    assert provider.sandbox_dir == settings.sandbox_dir.absolute()
    assert provider.images.image_dir == settings.image_dir.absolute()


def test_process_needs_explicit_permission(settings: Settings) -> None:
    with pytest.raises(ProviderRefused, match="without any isolation"):
        create_provider(settings.with_changes(sandbox={"provider": "process"}))
    allowed = settings.with_changes(sandbox={"provider": "process", "allow_process_provider": True})
    assert isinstance(create_provider(allowed), ProcessProvider)


async def test_sandboxes_live_in_the_sandbox_dir_when_one_is_set(
    settings: Settings, tmp_path: Path
) -> None:
    """EVALBOT_SANDBOX_DIR moves the sandboxes (not the rest of the data folder) elsewhere, e.g.
    onto tmpfs: a sandbox made by the provider the settings build is there, found by its run."""
    scratch = tmp_path / "scratch"
    chosen = settings.with_changes(
        sandbox={"provider": "process", "allow_process_provider": True, "sandbox_dir": scratch}
    )
    provider = create_provider(chosen)
    (image := tmp_path / "image").mkdir()
    spec = SandboxSpec("exp/case/arm/0", str(image), make_world(tmp_path / "world"), {"a": b"1"})
    sandbox = await provider.create(spec)
    try:
        assert (scratch / sandbox.id / "world" / "records.csv").read_text() == "id,name\n1,Acme\n"
        assert await provider.sandboxes_of("exp/case/arm/0") == [sandbox.id]
        assert not (settings.data_dir / "sandboxes").exists()
    finally:
        await sandbox.terminate()
    assert not (scratch / sandbox.id).exists()


def test_unknown_names_list_the_known_ones(settings: Settings) -> None:
    known = r"unknown sandbox provider 'nope'; known: local, modal, process"
    with pytest.raises(ProviderRefused, match=known):
        create_provider(settings.with_changes(sandbox={"provider": "nope"}))


def test_providers_can_be_registered(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("workflows.providers.PROVIDERS", dict(PROVIDERS))
    made: list[Settings] = []

    def factory(given: Settings) -> ProcessProvider:
        made.append(given)
        return ProcessProvider(given.sandbox_dir, given.image_dir, allowed=True)

    register_provider("fake", factory)
    chosen = settings.with_changes(sandbox={"provider": "fake"})
    assert isinstance(create_provider(chosen), ProcessProvider)
    assert made == [chosen]
