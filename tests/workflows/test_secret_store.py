"""The local secret store (all-or-nothing writes, private files) and `resolve_run_secrets`, the
helper the provision stage calls: only the named groups, none for unapproved runs."""

from __future__ import annotations

import stat

import pytest

import workflows.secret_store as secret_store
from workflows.secret_store import (
    LocalSecretStore,
    MissingSecretGroup,
    SecretStoreError,
    resolve_run_secrets,
)
from workflows.settings import Settings

LLM = {"OPENAI_API_KEY": "sk-openai-000111", "ANTHROPIC_API_KEY": "sk-ant-000222"}
SEARCH = {"SEARCH_API_KEY": "search-000333"}


@pytest.fixture
def store(settings: Settings) -> LocalSecretStore:
    store = LocalSecretStore.from_settings(settings)
    store.replace({"llm-keys": LLM, "search-api": SEARCH})
    return store


def test_replace_keeps_other_groups_and_files_are_private(store: LocalSecretStore) -> None:
    store.replace({"search-api": {"SEARCH_API_KEY": "search-rotated-9"}})

    assert store.read_all() == {
        "llm-keys": LLM,
        "search-api": {"SEARCH_API_KEY": "search-rotated-9"},
    }
    assert stat.S_IMODE(store.root.stat().st_mode) == 0o700
    for path in (store.root / "current").iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    generations = [p.name for p in store.root.iterdir() if p.name.startswith("gen-")]
    assert len(generations) == 1  # the previous generation is removed


def test_a_failed_write_leaves_every_group_as_it_was(
    store: LocalSecretStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write, calls = secret_store._write_values, []

    def fail_on_second(path: object, values: object) -> None:
        calls.append(path)
        if len(calls) == 2:
            raise OSError("disk full")
        real_write(path, values)  # type: ignore[arg-type]

    monkeypatch.setattr(secret_store, "_write_values", fail_on_second)

    with pytest.raises(OSError, match="disk full"):
        store.replace(
            {"llm-keys": {"OPENAI_API_KEY": "new-1234567"}, "search-api": {"S": "new-76543"}}
        )

    assert store.read_all() == {"llm-keys": LLM, "search-api": SEARCH}
    assert not [p for p in store.root.iterdir() if p.name.startswith(".staging")]


def test_an_empty_store_reads_as_empty_without_creating_anything(settings: Settings) -> None:
    store = LocalSecretStore.from_settings(settings)

    assert store.read_all() == {}
    assert store.group_names() == []
    assert not settings.secrets_dir.exists()


def test_a_run_gets_only_the_groups_it_names(settings: Settings, store: LocalSecretStore) -> None:
    assert resolve_run_secrets(settings, ["search-api"]) == SEARCH
    assert resolve_run_secrets(settings, ["llm-keys", "search-api"]) == {
        **LLM,
        **SEARCH,
    }
    assert resolve_run_secrets(settings, []) == {}


def test_a_missing_group_is_named(settings: Settings, store: LocalSecretStore) -> None:
    with pytest.raises(MissingSecretGroup) as raised:
        resolve_run_secrets(settings, ["llm-keys", "github-token"])

    assert raised.value.group == "github-token"
    assert "'github-token'" in str(raised.value)
    assert "llm-keys, search-api" in str(raised.value)


def test_two_groups_setting_one_variable_differently_is_an_error_without_values(
    settings: Settings, store: LocalSecretStore
) -> None:
    store.replace({"other": {"OPENAI_API_KEY": "sk-other-999888"}})

    with pytest.raises(SecretStoreError) as raised:
        resolve_run_secrets(settings, ["llm-keys", "other"])

    message = str(raised.value)
    assert "'llm-keys' and 'other'" in message and "OPENAI_API_KEY" in message
    assert "sk-" not in message


def test_group_names_are_checked(store: LocalSecretStore) -> None:
    with pytest.raises(SecretStoreError, match="invalid secret group name"):
        store.read_group("../etc")
