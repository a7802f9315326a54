"""Where synced secret groups go. `LocalSecretSink` writes the local secret store the local
provider injects from; `ModalSecretSink` (infra/secrets/modal_sink.py) writes Modal Secrets;
`build_sink` (infra/secrets/sinks.py) picks the one EVALBOT_SECRETS_SINK names."""

from __future__ import annotations

import abc
from collections.abc import Mapping

from infra.secrets.secret_errors import SinkError
from workflows.secret_store import LocalSecretStore, SecretStoreError


class SecretSink(abc.ABC):
    """A provider's secret groups. Implementations must not log or echo values."""

    name: str

    @abc.abstractmethod
    def existing_groups(self) -> set[str]:
        """Names of the groups the provider holds now."""

    @abc.abstractmethod
    def commit(self, groups: Mapping[str, Mapping[str, str]]) -> None:
        """Create or replace each group with exactly these values, keeping all other groups.
        All or nothing where the provider allows it; raise SinkError on failure."""


class LocalSecretSink(SecretSink):
    """0600 files in a 0700 folder under data_dir/secrets, swapped in atomically (one rename)."""

    name = "local"

    def __init__(self, store: LocalSecretStore) -> None:
        self.store = store

    def existing_groups(self) -> set[str]:
        return set(self.store.group_names())

    def commit(self, groups: Mapping[str, Mapping[str, str]]) -> None:
        try:
            self.store.replace(groups)
        except (OSError, SecretStoreError) as error:
            raise SinkError(
                f"could not write the local secret store {self.store.root} "
                f"({type(error).__name__}); the previous groups are untouched"
            ) from None
