"""create_provider: settings.sandbox.provider by name, process only when allowed."""

from __future__ import annotations

import pytest

from workflows.providers import PROVIDERS, create_provider, register_provider
from workflows.providers.base import ProviderRefused
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
