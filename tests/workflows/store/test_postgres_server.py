"""The PostgreSQL test server other suites reuse: it runs, isolates databases, fails loudly."""

from __future__ import annotations

import tempfile
from pathlib import Path

import psycopg2
import pytest

from tests.support.postgres import PostgresServer, PostgresUnavailable, find_bin_dir


def test_the_session_server_runs_with_test_settings(postgres_server: PostgresServer) -> None:
    connection = psycopg2.connect(postgres_server.dsn())
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('fsync'), current_setting('server_version_num')")
            fsync, version = cursor.fetchone()
    finally:
        connection.close()
    assert fsync == "off"
    assert int(version) // 10000 == int(find_bin_dir().parent.name)


def test_each_postgres_url_is_a_fresh_database(postgres_server: PostgresServer) -> None:
    first = postgres_server.create_database()
    second = postgres_server.create_database()
    try:
        assert first != second
        connection = psycopg2.connect(postgres_server.dsn(first))
        connection.close()
    finally:
        postgres_server.drop_database(first)
        postgres_server.drop_database(second)
    with pytest.raises(psycopg2.OperationalError, match="does not exist"):
        psycopg2.connect(postgres_server.dsn(first))


def test_missing_binaries_fail_with_how_to_install_and_leave_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(PostgresUnavailable, match="apt-get install postgresql"):
        find_bin_dir(tmp_path / "nothing")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with pytest.raises(PostgresUnavailable, match="initdb is missing"):
        PostgresServer(bin_dir=tmp_path / "nothing").start()
    assert list(scratch.iterdir()) == []
