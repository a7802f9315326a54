"""A throwaway PostgreSQL server for tests, plus the pytest fixtures that wrap it.

`PostgresServer` runs Debian's PostgreSQL binaries (`/usr/lib/postgresql/<version>/bin`) in a
temporary folder: `initdb` with trust auth, then `pg_ctl start` on a free loopback port with
fsync off. As root it runs them as the `postgres` user (initdb refuses root). Start takes ~2 s.

Fixtures (registered for the whole suite by `pytest_plugins` in tests/conftest.py):

- `postgres_server` (session): the running server; stopped and deleted at the end of the session.
- `postgres_url` (function): a fresh, empty database on it; dropped after the test.

If the binaries are missing the fixtures FAIL (never skip) with how to install them.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg2
import pytest

from workflows.ports import free_port

PG_ROOT = Path("/usr/lib/postgresql")
PREFERRED_VERSION = "15"
SERVER_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
    "shared_buffers": "32MB",
}


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL binaries are missing or the server would not start."""


def find_bin_dir(root: Path = PG_ROOT) -> Path:
    """The folder holding initdb and pg_ctl, preferring version 15."""
    candidates = sorted(root.glob("*/bin/initdb"), key=lambda p: p.parent.parent.name != "15")
    if not candidates:
        raise PostgresUnavailable(
            f"PostgreSQL server binaries not found under {root}; install them with "
            "`apt-get install postgresql` (or run `make test`, which does)."
        )
    return candidates[0].parent


class PostgresServer:
    """One PostgreSQL cluster in a temporary folder: start, url, create_database, stop."""

    def __init__(self, bin_dir: Path | None = None, user: str = "postgres") -> None:
        self.bin_dir = bin_dir or find_bin_dir()
        self.superuser = "postgres"
        self._os_user = user
        self._root: Path | None = None
        self.port = 0

    # -- paths and commands ----------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self._folder() / "data"

    @property
    def log_file(self) -> Path:
        return self._folder() / "server.log"

    def _folder(self) -> Path:
        if self._root is None:
            raise PostgresUnavailable("The PostgreSQL server has not been started.")
        return self._root

    def _run(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        binary = self.bin_dir / tool
        if not binary.exists():
            raise PostgresUnavailable(f"{binary} is missing; install Debian's postgresql package.")
        command = [str(binary), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", self._os_user, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> PostgresServer:
        """initdb + pg_ctl start; raises PostgresUnavailable with the server log on failure."""
        self._root = Path(tempfile.mkdtemp(prefix="evalbot-pg-"))
        try:
            return self._initdb_and_start()
        except BaseException:
            self.stop()
            raise

    def _initdb_and_start(self) -> PostgresServer:
        if os.geteuid() == 0:
            entry = pwd.getpwnam(self._os_user)
            os.chown(self._folder(), entry.pw_uid, entry.pw_gid)
        self._check(
            self._run(
                "initdb", "-D", str(self.data_dir), "-U", self.superuser, "--auth=trust",
                "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions",
            ),
            "initdb",
        )  # fmt: skip
        for attempt in range(3):  # the free port can be taken between probe and bind
            self.port = free_port()
            started = self._run(
                "pg_ctl", "-D", str(self.data_dir), "-l", str(self.log_file),
                "-w", "-t", "30", "-o", self._server_options(), "start",
            )  # fmt: skip
            if started.returncode == 0 or attempt == 2:
                break
        self._check(started, "pg_ctl start")
        return self

    def _server_options(self) -> str:
        settings = {**SERVER_SETTINGS, "port": str(self.port)}
        options = " ".join(f"-c {key}={value}" for key, value in settings.items())
        return f"-k {self._folder()} {options}"

    def _check(self, result: subprocess.CompletedProcess[str], what: str) -> None:
        if result.returncode == 0:
            return
        log = self.log_file.read_text(errors="replace")[-2000:] if self.log_file.exists() else ""
        self.stop()
        raise PostgresUnavailable(
            f"PostgreSQL {what} failed (exit {result.returncode}): "
            f"{(result.stderr or result.stdout).strip()} {log}".strip()
        )

    def stop(self) -> None:
        """Stop the server (immediate mode: no checkpoint) and delete its folder."""
        if self._root is None:
            return
        if (self.data_dir / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self._root, ignore_errors=True)
        self._root = None

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # -- databases -------------------------------------------------------------------------------

    def url(self, database: str = "postgres") -> str:
        """SQLAlchemy URL of `database` on this server (psycopg2 driver, TCP on loopback)."""
        return f"postgresql+psycopg2://{self.superuser}@127.0.0.1:{self.port}/{database}"

    def dsn(self, database: str = "postgres") -> str:
        """libpq connection string, for psycopg2 directly."""
        return f"host=127.0.0.1 port={self.port} user={self.superuser} dbname={database}"

    def create_database(self, name: str | None = None) -> str:
        """Create an empty database (a random name by default); return its name."""
        name = name or f"test_{uuid.uuid4().hex[:12]}"
        self._admin(f'CREATE DATABASE "{name}"')
        return name

    def drop_database(self, name: str) -> None:
        """Drop the database, disconnecting whoever is still connected to it."""
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def _admin(self, statement: str) -> None:
        connection = psycopg2.connect(self.dsn())
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(statement)
        finally:
            connection.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the whole session; FAILS (not skips) when it cannot start."""
    try:
        server = PostgresServer().start()
    except PostgresUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """SQLAlchemy URL of a fresh, empty database, dropped after the test."""
    name = postgres_server.create_database()
    try:
        yield postgres_server.url(name)
    finally:
        with contextlib.suppress(psycopg2.Error):
            postgres_server.drop_database(name)
