"""Sandbox providers by name. `create_provider(settings)` builds the one that
settings.sandbox.provider names.

Providers register a factory (settings -> provider) under their name; factories import their module
lazily, so choosing `local` never imports an SDK another provider needs.

The package, by who imports what: `base.py` is the contract every provider implements and imports
(it imports no provider); `local/`, `modal/` and `process.py` are the providers, with what only
each uses (the process provider's runner `spawner.py` sits beside it); `egress/` is the egress
proxy the `local` provider starts; `common/` is the plumbing several of them share, the in-sandbox
runner included. Built images and prewarming are workflows/prewarm.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from workflows.providers.base import ProviderRefused, SandboxProvider
from workflows.settings import Settings

ProviderFactory = Callable[[Settings], SandboxProvider]

# Host variables a build may need to reach package registries (never secrets of ours).
BUILD_ENV_NAMES = (
    "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
    "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_CERT", "PIP_DEFAULT_TIMEOUT",
    "UV_INDEX_URL", "npm_config_registry",
)  # fmt: skip


def _local(settings: Settings) -> SandboxProvider:
    from workflows.providers.local import LocalProvider

    build_env = {name: os.environ[name] for name in BUILD_ENV_NAMES if name in os.environ}
    return LocalProvider(
        settings.sandbox_dir,
        settings.image_dir,
        build_env=build_env,
        build_allow_domains=settings.sandbox.build_allow_domains,
        warm_pool_size=settings.sandbox.warm_pool_size,
        cgroup_root=settings.sandbox.cgroup_root,
        cgroups=settings.sandbox.cgroups,
    )


def _process(settings: Settings) -> SandboxProvider:
    from workflows.providers.process import ProcessProvider

    path = {"PATH": os.environ["PATH"]} if "PATH" in os.environ else {}
    return ProcessProvider(
        settings.sandbox_dir,
        settings.image_dir,
        allowed=settings.sandbox.allow_process_provider,
        base_env=path,
    )


def _modal(settings: Settings) -> SandboxProvider:
    from workflows.providers.modal import ModalProvider

    return ModalProvider.from_settings(settings)


PROVIDERS: dict[str, ProviderFactory] = {"local": _local, "process": _process, "modal": _modal}


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Make a provider available to `create_provider` (e.g. "modal", from its own module)."""
    PROVIDERS[name] = factory


def create_provider(settings: Settings) -> SandboxProvider:
    factory = PROVIDERS.get(settings.sandbox.provider)
    if factory is None:
        known = ", ".join(sorted(PROVIDERS))
        raise ProviderRefused(
            f"unknown sandbox provider {settings.sandbox.provider!r}; known: {known}"
        )
    return factory(settings)


__all__ = ["PROVIDERS", "ProviderFactory", "create_provider", "register_provider"]
