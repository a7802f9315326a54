"""The secret sinks EVALBOT_SECRETS_SINK chooses from: `local` (infra/secrets/sink.py) and `modal`
(infra/secrets/modal_sink.py)."""

from __future__ import annotations

from collections.abc import Callable

from infra.secrets.modal_sink import modal_sink
from infra.secrets.secret_errors import SinkError
from infra.secrets.sink import LocalSecretSink, SecretSink
from workflows.secret_store import LocalSecretStore
from workflows.settings import Settings


def _local(settings: Settings) -> SecretSink:
    return LocalSecretSink(LocalSecretStore.from_settings(settings))


SINKS: dict[str, Callable[[Settings], SecretSink]] = {"local": _local, "modal": modal_sink}


def build_sink(settings: Settings) -> SecretSink:
    factory = SINKS.get(settings.secrets.sink)
    if factory is None:
        known = ", ".join(sorted(SINKS))
        raise SinkError(f"unknown secret sink '{settings.secrets.sink}' (available: {known})")
    return factory(settings)
