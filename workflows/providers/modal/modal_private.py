"""The Modal calls without a public SDK API, in one place (docs/modal.md, "Upgrading the SDK").

- `overwrite_secret`: create a Secret or replace its contents exactly. `Secret._create_deployed(...,
  overwrite=True)`, the call `modal secret create --force` makes; `Secret.objects` can create or
  merge, not replace.
- `delete_image_name`: unpublish a named image (the image itself stays, as do snapshots built
  from it). The `ImageNameDelete` RPC, as `modal image names delete` sends it.

Each is pinned by tests/workflows/providers/test_modal_private.py against the wire-level test
server: an SDK upgrade that moves or renames one fails there, not in production. The SDK is
imported lazily, so importing this module never needs it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from typing import Any


def overwrite_secret(
    sdk: Any, name: str, values: Mapping[str, str], environment_name: str | None = None
) -> None:
    """Blocking, as the secret sync is."""
    options = {"environment_name": environment_name} if environment_name else {}
    sdk.Secret._create_deployed(name, dict(values), overwrite=True, **options)


async def delete_image_name(name: str) -> None:
    """Raises the SDK's NotFoundError when the name is not published."""
    await asyncio.to_thread(_blocking_delete(), name)


@functools.cache
def _blocking_delete() -> Any:
    from modal._image import _upgrade_image_name
    from modal._utils.async_utils import synchronizer
    from modal.client import _Client
    from modal.config import config
    from modal_proto import api_pb2

    async def delete(name: str) -> None:
        client = await _Client.from_env()
        tag = _upgrade_image_name(name, fallback_environment_name=config.get("environment"))
        await client.stub.ImageNameDelete(api_pb2.ImageNameDeleteRequest(tag=tag))

    return synchronizer.create_blocking(delete)
