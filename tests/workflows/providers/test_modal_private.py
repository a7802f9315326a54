"""The Modal calls without a public SDK API (workflows/providers/modal/modal_private.py), pinned on
the wire: each sends the RPC Modal's own CLI sends, as the Modal test server sees it. An SDK
upgrade that renames or moves one of them fails here (make test-modal runs this on the lowest and
highest allowed SDK)."""

from __future__ import annotations

import uuid

import modal
import pytest

from tests.fakes.modal_server.fixture import ModalTestServer
from workflows.providers.modal.modal_private import delete_image_name, overwrite_secret


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_overwrite_secret_creates_then_replaces_exactly(modal_server: ModalTestServer) -> None:
    name = unique("group")
    overwrite_secret(modal, name, {"A": "1", "B": "2"})
    overwrite_secret(modal, name, {"A": "3"})
    assert modal_server.cloud.secret(name)["env"] == {"A": "3"}  # B is gone, not merged


async def test_delete_image_name_unpublishes_the_name_only(modal_server: ModalTestServer) -> None:
    app = await modal.App.lookup.aio(unique("private"), create_if_missing=True)
    image = modal.Image.debian_slim()
    await image.build.aio(app)
    name = f"{unique('evalbot-private')}:v1"
    await image.publish.aio(name)
    assert modal_server.cloud.image_by_tag(name) == image.object_id

    await delete_image_name(name)

    with pytest.raises(modal.exception.NotFoundError):
        await modal.Image.from_name(name).build.aio(app)
    await modal.Image.from_id(image.object_id).build.aio(app)  # the image itself stays
    with pytest.raises(modal.exception.NotFoundError):
        await delete_image_name(name)
