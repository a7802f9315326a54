"""`ModalSecretSink`: synced secret groups as named Modal Secrets, one Secret per group.

The Secret's name is the group's name, which is what the `modal` provider asks for when a run's
`evalbot.toml` lists the group (`modal.Secret.from_name(group)`,
workflows/providers/modal/modal_provider.py).

Each group is written with one call that creates the Secret or replaces its contents exactly (keys
dropped from the mapping disappear): `overwrite_secret`, the one wrapper of that private call
(workflows/providers/modal/modal_private.py); the public `Secret.objects` API has create-if-missing
and merge-update, but no atomic replace. Modal has no transaction across Secrets,
so a failure part-way leaves the groups before it written (each one whole), the failed one and the
ones after it untouched, and says so; a rerun of the sync finishes the job. Values never appear in
errors or logs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.secrets.secret_errors import SinkError
from infra.secrets.sink import SecretSink
from workflows.providers.modal.modal_private import overwrite_secret
from workflows.secret_store import SecretStoreError, check_group_name


class ModalSecretSink(SecretSink):
    name = "modal"

    def __init__(self, sdk: Any, environment_name: str | None = None) -> None:
        self.sdk = sdk
        self.environment_name = environment_name

    def _options(self) -> dict[str, Any]:
        return {"environment_name": self.environment_name} if self.environment_name else {}

    def existing_groups(self) -> set[str]:
        try:
            secrets = self.sdk.Secret.objects.list(**self._options())
        except self.sdk.exception.Error as error:
            raise SinkError(f"could not list the Modal Secrets ({type(error).__name__})") from None
        return {str(secret.name) for secret in secrets if secret.name}

    def commit(self, groups: Mapping[str, Mapping[str, str]]) -> None:
        try:
            for name in groups:
                check_group_name(name)
        except SecretStoreError as error:
            raise SinkError(f"{error}; no Modal Secret was written") from None
        written: list[str] = []
        for name, values in groups.items():
            try:
                plain = {str(k): str(v) for k, v in values.items()}
                overwrite_secret(self.sdk, name, plain, self.environment_name)
            except self.sdk.exception.Error as error:
                before = ", ".join(written) or "none"
                raise SinkError(
                    f"could not write the Modal Secret '{name}' ({type(error).__name__}); "
                    f"written before it: {before}; it and the groups after it are untouched"
                ) from None
            written.append(name)


def modal_sink(settings: Any) -> SecretSink:
    """The sink `EVALBOT_SECRETS_SINK=modal` selects, on the real SDK."""
    import modal

    return ModalSecretSink(modal)
