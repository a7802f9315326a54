"""What the dashboard's routes depend on, as FastAPI dependencies: the settings, the store and the
blob store that `bot.app.create_app` puts on `app.state`, and the signed-in user (auth.py).

Routes take them as annotated parameters (`store: StoreDep`, `user: UserDep`). Every page but
sign-in hangs on a `signed_in_router()`, whose dependency refuses a request before its route runs:
401, or a redirect to the login form for a browser asking for HTML.
"""

from __future__ import annotations

from typing import Annotated

import anyio
from fastapi import APIRouter, Depends, HTTPException, Request

from bot.dashboard import auth
from workflows.blobs import BlobStore
from workflows.catalog.names import InvalidNameError, check_name
from workflows.settings import Settings
from workflows.store import ExperimentRecord, Store

PREFIX = "/dashboard"


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def get_blobs(request: Request) -> BlobStore:
    blobs: BlobStore = request.app.state.blobs
    return blobs


SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[Store, Depends(get_store)]
BlobsDep = Annotated[BlobStore, Depends(get_blobs)]


def get_user(request: Request, settings: SettingsDep) -> str:
    """The signed-in user (a GitHub login, or 'token'); anyone else is refused (module doc)."""
    try:
        return auth.authenticate(settings, request)
    except auth.Unauthenticated as error:
        if "text/html" in request.headers.get("accept", ""):
            raise HTTPException(303, headers={"Location": f"{PREFIX}/login"}) from None
        raise HTTPException(401, str(error), headers={"WWW-Authenticate": "Bearer"}) from None


UserDep = Annotated[str, Depends(get_user)]


def catalog_name(kind: str, value: str) -> str:
    """`value` if it is a catalog name (workflows/catalog/names.py), else 400 naming the rule."""
    try:
        return check_name(kind, value)
    except InvalidNameError as error:
        raise HTTPException(400, str(error)) from None


def signed_in_router() -> APIRouter:
    """A router under /dashboard whose every route requires a signed-in user."""
    return APIRouter(prefix=PREFIX, dependencies=[Depends(get_user)])


async def experiment_or_404(store: Store, experiment_id: str) -> ExperimentRecord:
    """The experiment, read off the event loop, or 404 naming it."""
    record = await anyio.to_thread.run_sync(store.get_experiment, experiment_id)
    if record is None:
        raise HTTPException(404, f"no experiment '{experiment_id}'")
    return record
