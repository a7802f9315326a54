"""Bad URLs and unreachable or unmigrated databases fail with one clear sentence, no secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.workflows.store.builders import make_result, make_spec
from workflows.ports import free_port
from workflows.settings import Settings
from workflows.store import Store, StoreError

SECRET = "hunter2-not-for-logs"


def _sentence(error: pytest.ExceptionInfo[StoreError]) -> str:
    message = str(error.value)
    assert "\n" not in message and message.endswith(".")
    assert SECRET not in message
    return message


@pytest.mark.parametrize("url", ["not a url", "", f"::{SECRET}@"])
def test_an_unparseable_url_is_refused_without_echoing_it(url: str) -> None:
    with pytest.raises(StoreError) as error:
        Store(url)
    assert "is not a valid SQLAlchemy URL; use sqlite:///PATH or postgresql://" in _sentence(error)


def test_an_unsupported_backend_is_refused() -> None:
    with pytest.raises(StoreError) as error:
        Store(f"mysql://evalbot:{SECRET}@localhost/evalbot")
    assert "backend 'mysql' is not supported" in _sentence(error)


def test_a_missing_driver_is_refused() -> None:
    with pytest.raises(StoreError) as error:
        Store(f"postgresql+nosuchdriver://evalbot:{SECRET}@localhost/evalbot")
    assert "Cannot use the database URL postgresql+nosuchdriver://evalbot:***@" in _sentence(error)


def test_an_unreachable_server_fails_on_first_use_with_the_masked_url() -> None:
    port = free_port()
    store = Store(f"postgres://evalbot:{SECRET}@127.0.0.1:{port}/evalbot")
    assert store.url == f"postgresql+psycopg2://evalbot:***@127.0.0.1:{port}/evalbot"
    with pytest.raises(StoreError) as error:
        store.migrate()
    message = _sentence(error)
    assert message.startswith(
        "Cannot connect to the database at postgresql+psycopg2://evalbot:***@"
    )
    assert "Connection refused" in message


def test_a_sqlite_file_in_a_missing_folder_says_so(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'missing' / 'evalbot.db'}")
    with pytest.raises(StoreError) as error:
        store.migrate()
    assert "(does its folder exist?)" in _sentence(error)


def test_an_unmigrated_database_asks_for_migrate(store_url: str) -> None:
    with Store(store_url) as store, pytest.raises(StoreError) as error:
        store.save_experiment(make_spec())
    assert "has no evalbot schema; run Store.migrate()" in _sentence(error)


def test_from_settings_creates_the_data_dir(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "deep" / "state")
    with Store.from_settings(settings) as store:
        store.migrate()
        store.save_experiment(make_spec())
    assert (tmp_path / "deep" / "state" / "evalbot.db").is_file()


def test_in_memory_sqlite_works_across_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    with Store("sqlite://") as store:
        store.migrate()
        store.save_experiment(make_spec())
        with ThreadPoolExecutor(4) as pool:
            saved = list(pool.map(lambda t: store.save_run(make_result(trial=t)), range(8)))
        assert all(saved)
        assert store.count_runs("exp-1") == {"scored": 8}
