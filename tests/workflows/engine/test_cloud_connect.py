"""Temporal Cloud options: an API key turns TLS on (a plaintext dev server then refuses the
handshake), TLS can be set either way explicitly, and the key reaches the client's connection."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from workflows.engine.devserver import DevServer
from workflows.engine.engine_client import cloud_options, connect
from workflows.settings import Settings


def test_an_api_key_turns_tls_on_unless_told_otherwise() -> None:
    assert cloud_options(Settings()) == {"api_key": None, "tls": False}
    keyed = Settings(temporal={"api_key": SecretStr("k")})
    assert cloud_options(keyed) == {"api_key": "k", "tls": True}
    plain = Settings(temporal={"api_key": SecretStr("k"), "tls": False})
    assert cloud_options(plain) == {"api_key": "k", "tls": False}
    assert cloud_options(Settings(temporal={"tls": True})) == {"api_key": None, "tls": True}


async def test_with_a_key_the_client_speaks_tls(temporal_server: DevServer) -> None:
    keyed = Settings(temporal={"address": temporal_server.address, "api_key": SecretStr("k")})
    with pytest.raises(RuntimeError):  # TLS against the plaintext dev server: no handshake
        await connect(keyed, wait_s=0)
    plain = keyed.with_changes(temporal={"tls": False})
    client = await connect(plain, wait_s=30)
    assert client.service_client.config.api_key == "k"
    assert await client.count_workflows() is not None  # the key rides along; the server answers
