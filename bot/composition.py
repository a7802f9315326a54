"""The composition root: builds the store, provider, grader and extra activities from Settings.

Everything else receives these objects; nothing else reads the environment.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from workflows.engine.embedded import Session, engine_session
from workflows.engine.grading import CaseGrader
from workflows.engine.worker import ROLES
from workflows.providers import create_provider
from workflows.secret_store import resolve_run_secrets
from workflows.settings import Settings
from workflows.store import Store


def open_store(settings: Settings) -> Store:
    store = Store.from_settings(settings)
    store.migrate()
    return store


def extra_activities(settings: Settings, store: Store) -> list[Callable[..., Any]]:
    """Activities of the surfaces (GitHub reporting) registered on the runs worker."""
    from bot.github.activities import github_activities

    return list(github_activities(settings, store))


@contextlib.asynccontextmanager
async def session(
    settings: Settings, store: Store, *, run_workers: bool = True, roles: Sequence[str] = ROLES
) -> AsyncIterator[Session]:
    """A Temporal session with this process's workers (embedded dev server when unconfigured)."""
    provider = create_provider(settings)
    async with engine_session(
        settings,
        provider,
        store,
        CaseGrader(),
        run_workers=run_workers,
        roles=roles,
        extra_activities=extra_activities(settings, store),
        secrets=functools.partial(resolve_run_secrets, settings),
    ) as active:
        yield active
